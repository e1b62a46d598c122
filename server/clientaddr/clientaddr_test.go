package clientaddr

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClient(t *testing.T) {
	t.Parallel()
	trusted, err := Parse("10.0.0.0/8, 192.0.2.7,2001:db8::/32")
	require.NoError(t, err)
	for _, tc := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"untrusted peer: its header is never read", "198.51.100.1", []string{"203.0.113.9"}, "198.51.100.1"},
		{"trusted peer, one hop", "10.1.2.3", []string{"203.0.113.9"}, "203.0.113.9"},
		{"a spoofed left entry is not the client", "10.1.2.3", []string{"6.6.6.6, 203.0.113.9"}, "203.0.113.9"},
		{"trusted hops are skipped from the right", "10.1.2.3", []string{"203.0.113.9, 10.9.9.9", "192.0.2.7"}, "203.0.113.9"},
		{"trusted peer without header", "192.0.2.7", nil, "192.0.2.7"},
		{"every entry trusted: the left-most", "10.1.2.3", []string{"10.0.0.1"}, "10.0.0.1"},
		{"a malformed entry stops the walk", "10.1.2.3", []string{"203.0.113.9, garbage, 10.0.0.5"}, "10.0.0.5"},
		{"ports and brackets", "2001:db8::1", []string{"[2001:db9::5]:443"}, "2001:db9::5"},
		{"mapped peer", "::ffff:10.1.2.3", []string{"203.0.113.9:55"}, "203.0.113.9"},
	} {
		got := trusted.Client(netip.MustParseAddr(tc.peer), tc.xff)
		require.Equal(t, tc.want, got.String(), tc.name)
	}
	none, err := Parse("")
	require.NoError(t, err)
	require.True(t, none.Empty())
	require.Equal(t, "10.1.2.3", none.Client(netip.MustParseAddr("10.1.2.3"), []string{"203.0.113.9"}).String())
	_, err = Parse("10.0.0.0/8,not-a-prefix")
	require.ErrorContains(t, err, `"not-a-prefix"`)
	require.Equal(t, "10.0.0.0/8,192.0.2.7/32,2001:db8::/32", trusted.String())
}

func TestHandlerRewritesRemoteAddr(t *testing.T) {
	t.Parallel()
	trusted, err := Parse("127.0.0.1/32")
	require.NoError(t, err)
	var remote, peer string
	h := trusted.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { remote, peer = r.RemoteAddr, Peer(r) }))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "127.0.0.1:4242"
	r.Header.Set("X-Forwarded-For", "203.0.113.9")
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.Equal(t, "203.0.113.9:0", remote)
	require.Equal(t, "127.0.0.1:4242", peer)

	r.RemoteAddr = "198.51.100.1:4242"
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.Equal(t, "198.51.100.1:4242", remote, "an untrusted peer's header is ignored")
	require.Empty(t, peer)
}
