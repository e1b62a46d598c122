package scenarios

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/grant"
)

// Every kind of grant, on either store, used as its holder may and as it
// may not: the input get grant and the output put grant of an offer, a
// succeeded job's download grant, a buyer's upload grant, each used for
// its key and operation, for another key, with the other operation, past
// its lifetime, and (S3) without the create-only condition it signs. On a
// directory the grants are the control plane's signed URLs served by its
// artifact handler; on S3 presigned URLs of the bucket.

func init() {
	for name, h := range map[string]scCommand{"grant": cmdGrant, "issue": cmdIssue} {
		scCommands[name] = h
	}
}

// scGrant is one grant URL a script uses, with what it opens.
type scGrant struct {
	what string // for messages: "j1's input get grant"
	url  string
	op   grant.Op
	key  string // the artifact key the grant is for
	// sha is the SHA-256 a GET of it must return ("" unchecked).
	sha string
}

// cmdGrant uses one grant and checks the answer.
//
//	grant AGENT JOB input|output USE   the input get grant or the output put grant of AGENT's offer of JOB
//	grant download JOB USE             the download_url of succeeded JOB (GET /v1/jobs/{id} once, then kept)
//	grant upload NAME USE              the upload_url of `input NAME` or `declare NAME`
//	grant key KEY get|put              (directory store) a grant the harness signs, with the
//	                                   stacks' signing key, for KEY as written ({JOB}, {uuid})
//
// USE is get or put (as the holder sends it: a put with If-None-Match: *),
// put-bare (a put without the condition), wrong-op (the URL with the other
// method), other-key (the URL naming another key of its kind), ttl (-> the
// grant's lifetime: its exp less the pinned now on a directory, its
// X-Amz-Expires on S3), or expired (S3: the same request presigned with
// the bucket's credentials, its lifetime over a minute ago by the bucket's
// clock). After `->` the status and, optionally, the code: the API error's
// on a directory, the bucket's <Code> on S3. A 200 GET of an input or an
// output must return its recorded SHA-256; a refused PUT must leave the
// key's object as it was.
// Example: grant a1 j1 input other-key -> 403
// Example: grant download j1 ttl -> 15m
// Example: grant key outputs/{j1}/{uuid}.mp4 put -> 409 output_sealed
func cmdGrant(r *scRun, st scStep) error {
	g, use, err := r.grantOf(st)
	if err != nil {
		return err
	}
	if len(st.arrow) == 0 {
		return errors.New("grant: want -> STATUS [CODE] (or -> DURATION for ttl)")
	}
	if use == "ttl" {
		return r.grantTTL(g, st.arrow[0])
	}
	method, target, body, header := http.MethodGet, g.url, []byte(nil), http.Header{}
	putting := g.op == grant.Put
	switch use {
	case "get", "put":
		if (use == "put") != putting {
			return fmt.Errorf("grant: %s is a %s grant; use wrong-op to %s it", g.what, g.op, use)
		}
	case "put-bare":
		if !putting {
			return fmt.Errorf("grant: %s is a get grant", g.what)
		}
	case "wrong-op":
		putting = !putting
	case "other-key":
		if target, err = r.otherKeyURL(g); err != nil {
			return err
		}
	case "expired":
		if target, err = r.expiredURL(g); err != nil {
			return err
		}
	default:
		return fmt.Errorf("grant: unknown use %q (want get, put, put-bare, wrong-op, other-key, ttl or expired)", use)
	}
	if putting {
		method, body = http.MethodPut, []byte("bytes of a grant check")
		if use != "put-bare" {
			header.Set(protocol.OutputPutCondition, protocol.OutputPutCreateOnly)
		}
	}
	key, err := r.urlKey(target)
	if err != nil {
		return err
	}
	before := r.objectPrint(key)
	req, err := http.NewRequestWithContext(r.ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = header
	if body == nil {
		req.Body, req.ContentLength = nil, 0
	}
	resp, err := r.httpc.Do(req)
	if err != nil {
		return fmt.Errorf("grant: %s %s: %w", method, g.what, err)
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	_ = resp.Body.Close()
	code := ""
	if resp.StatusCode >= http.StatusBadRequest {
		code = bucketCode(data)
		if u, _ := url.Parse(target); strings.HasPrefix(u.Path, grant.PathPrefix) { // the control plane's handler
			e, err := errorShape(resp.StatusCode, resp.Header, data)
			if err != nil {
				return fmt.Errorf("grant: %s %s: %w", use, g.what, err)
			}
			code = e.Code
		}
	}
	got := strings.TrimSpace(strconv.Itoa(resp.StatusCode) + " " + code)
	r.tl.add(laneGateway, fmt.Sprintf("%s %s with %s (%s): %s", method, r.keyName(key), g.what, use, got))
	r.reply(fmt.Sprintf("grant %s %s -> %s", g.what, use, got))
	if strconv.Itoa(resp.StatusCode) != st.arrow[0] || (len(st.arrow) > 1 && code != st.arrow[1]) {
		return fmt.Errorf("grant: %s %s (%s %s): want %s, got %s: %.300s", use, g.what, method, key, strings.Join(st.arrow, " "), got, data)
	}
	if resp.StatusCode == http.StatusOK && method == http.MethodGet && g.sha != "" {
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != g.sha {
			return fmt.Errorf("grant: GET with %s returned %d bytes sha256 %s, want sha256 %s", g.what, len(data), got, g.sha)
		}
	}
	if resp.StatusCode >= http.StatusBadRequest {
		r.count("grant.refused", 1)
		if after := r.objectPrint(key); after != before {
			return fmt.Errorf("grant: %s refused %d, yet %s went from %s to %s", g.what, resp.StatusCode, key, before, after)
		}
	}
	return nil
}

// grantOf resolves a grant step to its grant and its use.
func (r *scRun) grantOf(st scStep) (scGrant, string, error) {
	words := st.args
	switch arg(st, 0) {
	case "download":
		if g, ok := r.surfaceState().downloads[arg(st, 1)]; ok {
			return g, arg(st, 2), nil
		}
		id, err := r.jobID(arg(st, 1))
		if err != nil {
			return scGrant{}, "", err
		}
		gw, err := r.stack(st.opt("via", "gw1"))
		if err != nil {
			return scGrant{}, "", err
		}
		d, err := r.buyer(gw.baseURL(), r.apiKey).Get(r.ctx, id)
		if err != nil {
			return scGrant{}, "", fmt.Errorf("grant download: GET job %s: %w", arg(st, 1), err)
		}
		if d.Output == nil {
			return scGrant{}, "", fmt.Errorf("grant download: job %s (%s) offers no output", arg(st, 1), d.Status)
		}
		g := scGrant{what: arg(st, 1) + "'s download grant", url: d.Output.DownloadURL, op: grant.Get, key: d.Output.Key,
			sha: d.Output.SHA256}
		r.surfaceState().downloads[arg(st, 1)] = g
		return g, arg(st, 2), nil
	case "upload":
		up, ok := r.surfaceState().uploads[arg(st, 1)]
		if !ok {
			return scGrant{}, "", fmt.Errorf("grant upload: no input %q", arg(st, 1))
		}
		return scGrant{what: arg(st, 1) + "'s upload grant", url: up.UploadURL, op: grant.Put,
			key: artifact.UploadKey(scBuyerID, up.InputID)}, arg(st, 2), nil
	case "key":
		if r.s3 != nil {
			return scGrant{}, "", errors.New("grant key: the harness signs grants of the control plane's handler: directory store only (store=fs)")
		}
		key, err := r.expand(arg(st, 1))
		if err != nil {
			return scGrant{}, "", err
		}
		op := grant.Op(arg(st, 2))
		if op != grant.Get && op != grant.Put {
			return scGrant{}, "", errors.New("want: grant key KEY get|put")
		}
		gw, err := r.stack(st.opt("via", "gw1"))
		if err != nil {
			return scGrant{}, "", err
		}
		signer, err := grant.NewSigner(scSigningKey, gw.baseURL())
		if err != nil {
			return scGrant{}, "", err
		}
		return scGrant{what: "a grant signed for " + arg(st, 1), url: signer.URL(op, key, r.clock.Now(), time.Minute), op: op,
			key: key}, string(op), nil
	}
	if len(words) < 4 {
		return scGrant{}, "", errors.New("want: grant AGENT JOB input|output USE | grant download JOB USE | grant upload NAME USE | grant key KEY get|put")
	}
	a, o, _, err := r.frameParts(st, 2)
	if err != nil {
		return scGrant{}, "", err
	}
	switch words[2] {
	case "input":
		return scGrant{what: a.name + "'s input get grant of " + words[1], url: o.Input.URL, op: grant.Get,
			key: protocol.InputKey(o.JobID), sha: o.Input.SHA256}, words[3], nil
	case "output":
		return scGrant{what: a.name + "'s output put grant of " + words[1], url: o.Output.UploadURL, op: grant.Put,
			key: o.Output.Key}, words[3], nil
	}
	return scGrant{}, "", fmt.Errorf("grant: %q: want input or output", words[2])
}

// urlKey is the artifact key a grant URL names: the path after the
// artifact handler's prefix, or after the bucket and the store's prefix.
func (r *scRun) urlKey(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if key, ok := strings.CutPrefix(u.Path, grant.PathPrefix); ok {
		return key, nil
	}
	if r.s3 != nil {
		if key, ok := strings.CutPrefix(u.Path, "/"+r.s3.bucket+"/"+scS3Prefix); ok {
			return key, nil
		}
	}
	return "", fmt.Errorf("grant URL %s names no artifact key", raw)
}

// otherKeyURL is g's URL with its key replaced by another of its kind:
// another job's input, another attempt's output, another upload.
func (r *scRun) otherKeyURL(g scGrant) (string, error) {
	var other string
	switch parts := strings.Split(g.key, "/"); {
	case strings.HasPrefix(g.key, "inputs/"):
		other = protocol.InputKey(newUUID())
	case strings.HasPrefix(g.key, "outputs/") && len(parts) == 3:
		other = protocol.OutputKey(parts[1], newUUID())
	case strings.HasPrefix(g.key, "uploads/") && len(parts) == 3:
		other = artifact.UploadKey(parts[1], parts[2]+"x")
	default:
		return "", fmt.Errorf("grant: no other key of the kind of %s", g.key)
	}
	u, err := url.Parse(g.url)
	if err != nil {
		return "", err
	}
	i := strings.LastIndex(u.Path, g.key)
	if i < 0 {
		return "", fmt.Errorf("grant: %s does not name its key %s", g.url, g.key)
	}
	u.Path, u.RawPath = u.Path[:i]+other+u.Path[i+len(g.key):], ""
	return u.String(), nil
}

// grantTTL checks a grant's lifetime: its exp less the pinned now (the
// control plane's grants), or its X-Amz-Expires (a bucket's).
func (r *scRun) grantTTL(g scGrant, wantText string) error {
	want, err := time.ParseDuration(wantText)
	if err != nil {
		return fmt.Errorf("grant ttl: %q: %w", wantText, err)
	}
	u, err := url.Parse(g.url)
	if err != nil {
		return err
	}
	q := u.Query()
	var got time.Duration
	switch {
	case q.Get("X-Amz-Expires") != "":
		s, err := strconv.Atoi(q.Get("X-Amz-Expires"))
		if err != nil {
			return fmt.Errorf("grant ttl: X-Amz-Expires %q: %w", q.Get("X-Amz-Expires"), err)
		}
		got = time.Duration(s) * time.Second
	case q.Get("exp") != "":
		exp, err := strconv.ParseInt(q.Get("exp"), 10, 64)
		if err != nil {
			return fmt.Errorf("grant ttl: exp %q: %w", q.Get("exp"), err)
		}
		got = time.Unix(exp, 0).Sub(r.clock.Now())
	default:
		return fmt.Errorf("grant ttl: %s carries no expiry", g.what)
	}
	r.tl.add(laneGateway, fmt.Sprintf("%s expires %s after it was issued", g.what, got))
	r.reply(fmt.Sprintf("grant %s ttl -> %s", g.what, got))
	if got != want {
		return fmt.Errorf("grant ttl: %s lives %s, want %s", g.what, got, want)
	}
	return nil
}

// expiredURL presigns g's request again with the bucket's credentials and
// g's own lifetime, signed so long ago that the lifetime ran out a minute
// before now: only the bucket's clock can refuse it.
func (r *scRun) expiredURL(g scGrant) (string, error) {
	if r.s3 == nil {
		return "", errors.New("grant expired: a bucket's clock (store=s3); on a directory advance the pinned clock instead")
	}
	u, err := url.Parse(g.url)
	if err != nil {
		return "", err
	}
	secs, err := strconv.Atoi(u.Query().Get("X-Amz-Expires"))
	if err != nil {
		return "", fmt.Errorf("grant expired: %s carries no X-Amz-Expires", g.what)
	}
	method := http.MethodGet
	if g.op == grant.Put {
		method = http.MethodPut
	}
	u.RawQuery = url.Values{"X-Amz-Expires": {strconv.Itoa(secs)}}.Encode()
	req, err := http.NewRequestWithContext(r.ctx, method, u.String(), nil)
	if err != nil {
		return "", err
	}
	signed := time.Now().Add(-time.Duration(secs)*time.Second - time.Minute)
	out, _, err := v4.NewSigner().PresignHTTP(r.ctx, aws.Credentials{AccessKeyID: s3provider.AccessKey,
		SecretAccessKey: s3provider.SecretKey}, req, "UNSIGNED-PAYLOAD", "s3", s3provider.Region, signed)
	return out, err
}

// objectPrint renders the object at key as the store holds it, past every
// injected fault: its size and SHA-256, or none.
func (r *scRun) objectPrint(key string) string {
	if artifact.ValidateKey(key) != nil {
		return "none (not a key)"
	}
	obj, err := artifact.Hash(r.ctx, r.store.raw, key)
	if errors.Is(err, artifact.ErrNotFound) {
		return "none"
	}
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return fmt.Sprintf("%d bytes sha256 %.12s", obj.Bytes, obj.SHA256)
}

// bucketCode is the <Code> of an S3 error body, or "".
func bucketCode(body []byte) string {
	if m := s3Code.FindSubmatch(body); m != nil {
		return string(m[1])
	}
	return ""
}

var s3Code = regexp.MustCompile(`<Code>([A-Za-z]+)</Code>`)

// cmdIssue asks the run's grant issuer for a grant of KEY, as the control
// plane would, and checks whether it issues one: a bucket's presigned put
// grants exist only for inputs, uploads and outputs (S3 only: the control
// plane's own signer serves every key through its handler, which checks
// each PUT itself).
// Example: issue put sealed/outputs/{j1}/{uuid}.mp4 -> refused
func cmdIssue(r *scRun, st scStep) error {
	if r.s3 == nil {
		return errors.New("issue: the bucket's grants (store=s3)")
	}
	op := grant.Op(arg(st, 0))
	key, err := r.expand(arg(st, 1))
	if err != nil {
		return err
	}
	if (op != grant.Get && op != grant.Put) || len(st.arrow) != 1 || (st.arrow[0] != "refused" && st.arrow[0] != "issued") {
		return errors.New("want: issue get|put KEY -> issued|refused")
	}
	_, gerr := r.grants().Grant(r.ctx, op, key, r.clock.Now(), time.Minute)
	got := "issued"
	if gerr != nil {
		got = "refused"
		r.count("issue.refused", 1)
	}
	r.tl.add(laneGateway, fmt.Sprintf("bucket grant of %s for %s: %s", op, arg(st, 1), got))
	r.reply(fmt.Sprintf("issue %s %s -> %s", op, arg(st, 1), got))
	if got != st.arrow[0] {
		return fmt.Errorf("issue %s %s: want %s, got %s (%v)", op, arg(st, 1), st.arrow[0], got, gerr)
	}
	return nil
}
