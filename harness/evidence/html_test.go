package evidence

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func renderHTML(t *testing.T, c Card, o WriteOptions) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteHTML(&buf, c, o))
	return buf.String()
}

func TestHTMLEscapes(t *testing.T) {
	t.Parallel()
	c := sampleCard(false)
	c.Scenarios[0].Name = `<script>alert("x")</script>`
	c.Scenarios[0].Timeline[0].Label = `<img src=x onerror=alert(1)>`
	c.NotCovered = append(c.NotCovered, `"quoted" & <b>bold</b>`)
	page := renderHTML(t, c, WriteOptions{})
	require.NotContains(t, page, "<script")
	require.NotContains(t, page, "<img")
	require.NotContains(t, page, "<b>")
	require.Contains(t, page, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;")
	require.Contains(t, page, "&#34;quoted&#34; &amp; &lt;b&gt;bold&lt;/b&gt;")
}

func TestHTMLTimelineLanes(t *testing.T) {
	t.Parallel()
	page := renderHTML(t, sampleCard(false), WriteOptions{})
	for _, lane := range lanes {
		require.Contains(t, page, `<div class="lane">`+lane+`</div>`)
	}
	// Steps 1, 2, 3 and 5 become four columns; step 5 has a gateway and a
	// database event in the same column.
	require.Contains(t, page, "repeat(4, minmax(6em, 1fr))")
	require.Contains(t, page, `<div class="cell"><span class="box database">commit tx</span></div>`)
	gateway := page[strings.Index(page, `<div class="lane">gateway</div>`):]
	gateway = gateway[:strings.Index(gateway, "\n")]
	require.Equal(t, `<div class="lane">gateway</div><div class="cell"></div>`+
		`<div class="cell"><span class="box gateway">verify output</span></div><div class="cell"></div>`+
		`<div class="cell"><span class="box gateway">retry commit</span></div>`, gateway)
	require.Contains(t, page, "No timeline recorded.")
	require.NotContains(t, page, "ZgotmplZ", "html/template rejected a value")
	require.NotContains(t, page, "<script", "no JavaScript needed")
}

func TestHTMLContentAndNoTimings(t *testing.T) {
	t.Parallel()
	page := renderHTML(t, sampleCard(false), WriteOptions{})
	for _, want := range []string{"What was run", "Reply codes: full-stack", "Invariants checked",
		`<li value="1">At most one attempt per job commits.</li>`, "rendermac scenario run sweep-clock-jump",
		"Not covered by this run", `<td class="num">41.5s</td>`} {
		require.Contains(t, page, want)
	}
	quiet := renderHTML(t, sampleCard(false), WriteOptions{NoTimings: true})
	require.NotContains(t, quiet, "Duration")
	require.NotContains(t, quiet, "Run time")
	require.Empty(t, durationText.FindAllString(quiet, -1))
	require.Equal(t, quiet, renderHTML(t, sampleCard(true), WriteOptions{NoTimings: true}))
}
