package artifact

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/grant"
)

// s3PartBytes is the part size of a multipart Put and the most a Put ever
// holds in memory: a body shorter than this goes up in one PutObject.
const s3PartBytes = 8 << 20

// S3Config locates a bucket. Credentials, region and endpoint not given here
// come from the standard AWS environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL_S3, shared config).
type S3Config struct {
	// Bucket and Prefix: objects live at Prefix+key in Bucket. Prefix is ""
	// or ends in "/".
	Bucket, Prefix string
	// Endpoint overrides the S3 endpoint (MinIO, R2, versitygw), e.g.
	// "http://127.0.0.1:7070".
	Endpoint string
	// PathStyle addresses the bucket as endpoint/bucket/key instead of
	// bucket.endpoint/key; MinIO and versitygw want it.
	PathStyle bool
	// Region defaults to AWS_REGION, else "us-east-1".
	Region string
	// AccessKey and SecretKey, when both set, replace the environment's
	// credentials.
	AccessKey, SecretKey string
	// HTTPClient, when set, carries the store's requests.
	HTTPClient *http.Client
}

// ParseS3URL splits "s3://BUCKET/PREFIX" into a config's Bucket and Prefix
// (a non-empty prefix gains a trailing "/"). Anything else is an error that
// says what the flag wants.
func ParseS3URL(raw string) (S3Config, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return S3Config{}, fmt.Errorf("artifact: %q is not s3://BUCKET[/PREFIX]", raw)
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := ValidateKey(prefix); err != nil {
			return S3Config{}, fmt.Errorf("artifact: s3 prefix of %q: %w", raw, err)
		}
		prefix += "/"
	}
	return S3Config{Bucket: u.Host, Prefix: prefix}, nil
}

// S3 is a Store in an S3-compatible bucket. Objects appear whole or not at
// all because S3 publishes a PUT (and a completed multipart upload, and a
// copy) atomically. Agents write output keys themselves with presigned
// URLs (Presign), so the control plane cannot fence those writes; it seals
// instead: S3 implements Sealer, and Verify checks and serves a private
// copy (see Sealer and docs/semantics.md, invariant 8 on S3).
type S3 struct {
	client  *s3.Client
	presign *s3.PresignClient
	bucket  string
	prefix  string
	// copyPartBytes, when set, replaces s3CopyMaxBytes (tests copy in
	// parts without 5 GiB objects).
	copyPartBytes int64
}

var (
	_ Store  = (*S3)(nil)
	_ Sealer = (*S3)(nil)
)

// NewS3 returns a store on cfg's bucket. It does not touch the network; the
// first request reports a missing bucket or bad credentials.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("artifact: s3 store needs a bucket")
	}
	if cfg.Prefix != "" && !strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("artifact: s3 prefix %q must end in /", cfg.Prefix)
	}
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKey != "" && cfg.SecretKey != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("artifact: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1" // S3-compatible servers mostly ignore it; the signer needs one
	}
	if awsCfg.Credentials == nil {
		return nil, errors.New("artifact: s3 store has no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a shared AWS profile)")
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		// versitygw's posix backend answers 409 ExistingObjectIsDirectory
		// when two writes create the same parent directory at once (seen
		// with concurrent verifications); the write did not happen, so it
		// is retried like a throttle. AWS S3 never sends this code.
		o.Retryer = retry.AddWithErrorCodes(retry.NewStandard(), "ExistingObjectIsDirectory")
		if cfg.HTTPClient != nil {
			o.HTTPClient = cfg.HTTPClient
		}
		// Checksums only where the API requires them: a presigned PUT must
		// not carry a checksum of a body the presigner never saw, and
		// Verify hashes the bytes itself anyway.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &S3{client: client, presign: s3.NewPresignClient(client), bucket: cfg.Bucket, prefix: cfg.Prefix}, nil
}

// Check makes sure the bucket can hold artifacts, so a server refuses to
// start on one it cannot use instead of failing its first commit: the
// bucket answers, and it honours create-only writes (it refuses a second
// PUT of a key sent with If-None-Match: *), which make output keys
// write-once (PresignCreate). It writes and deletes one probe object under
// the prefix.
func (s *S3) Check(ctx context.Context) error {
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.bucket})
	if err != nil {
		return fmt.Errorf("artifact: s3 bucket %q: %w", s.bucket, err)
	}
	probe := aws.String(s.prefix + "probe/create-only." + rand.Text())
	defer func() {
		_, _ = s.client.DeleteObject(context.WithoutCancel(ctx), &s3.DeleteObjectInput{Bucket: &s.bucket, Key: probe})
	}()
	for i := range 2 {
		_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: probe, Body: strings.NewReader("probe"),
			ContentLength: aws.Int64(5), IfNoneMatch: aws.String(protocol.OutputPutCreateOnly)})
		switch {
		case i == 0 && err != nil:
			return fmt.Errorf("artifact: s3 bucket %q: write a probe object: %w", s.bucket, err)
		case i == 1 && err == nil:
			return fmt.Errorf("artifact: s3 bucket %q does not honour If-None-Match: * (a second create-only PUT of a key was "+
				"stored): it cannot keep output keys write-once; use a server with conditional writes (AWS S3, MinIO, R2, versitygw >= 1.8)", s.bucket)
		case i == 1 && !preconditionFailed(err):
			return fmt.Errorf("artifact: s3 bucket %q: a second create-only PUT: want 412 PreconditionFailed, got %w", s.bucket, err)
		}
	}
	return nil
}

// preconditionFailed reports whether err is S3's answer to a create-only
// PUT of a key that exists.
func preconditionFailed(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "PreconditionFailed"
}

func (s *S3) name(ctx context.Context, key string) (*string, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	return aws.String(s.prefix + key), ctx.Err()
}

// Put uploads r: in one PutObject when it is shorter than one part, else as
// a multipart upload of s3PartBytes parts, so memory stays bounded for any
// size. A failing r aborts the upload and leaves the key unchanged.
func (s *S3) Put(ctx context.Context, key string, r io.Reader) (Object, error) {
	name, err := s.name(ctx, key)
	if err != nil {
		return Object{}, err
	}
	obj, err := s.upload(ctx, name, r)
	if err != nil {
		return Object{}, fmt.Errorf("artifact: put %q: %w", key, err)
	}
	obj.Key = key
	return obj, nil
}

func (s *S3) upload(ctx context.Context, name *string, r io.Reader) (Object, error) {
	h := sha256.New()
	r = io.TeeReader(ctxReader{ctx: ctx, r: r}, h)
	buf := make([]byte, s3PartBytes)
	n, err := io.ReadFull(r, buf)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		_, err = s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: name,
			Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n))})
		return Object{Bytes: int64(n), SHA256: hex.EncodeToString(h.Sum(nil))}, err
	}
	if err != nil {
		return Object{}, err
	}
	mp, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: name})
	if err != nil {
		return Object{}, err
	}
	total, err := s.uploadParts(ctx, name, mp.UploadId, buf, n, r)
	if err != nil {
		// Never completed, so the key is unchanged; abort frees the parts.
		_, _ = s.client.AbortMultipartUpload(context.WithoutCancel(ctx),
			&s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: name, UploadId: mp.UploadId})
		return Object{}, err
	}
	return Object{Bytes: total, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// uploadParts sends buf[:n] as part 1 and the rest of r after it, then
// completes the upload (the moment the object appears).
func (s *S3) uploadParts(ctx context.Context, name, uploadID *string, buf []byte, n int, r io.Reader) (int64, error) {
	var parts []s3types.CompletedPart
	var total int64
	for num := int32(1); n > 0; num++ {
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.bucket, Key: name, UploadId: uploadID,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n))})
		if err != nil {
			return 0, err
		}
		parts = append(parts, s3types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		total += int64(n)
		n, err = io.ReadFull(r, buf)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, err
		}
	}
	_, err := s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: name,
		UploadId: uploadID, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}})
	return total, err
}

// PutIf uploads r to a private staging key, then lets guard publish it by a
// server-side copy to key; the staging object is deleted either way. The
// copy is one atomic S3 write, so it runs inside the guard's lock like FS's
// rename.
func (s *S3) PutIf(ctx context.Context, key string, r io.Reader, guard Guard) (Object, error) {
	if guard == nil {
		return s.Put(ctx, key, r)
	}
	if _, err := s.name(ctx, key); err != nil {
		return Object{}, err
	}
	staging := stagingKey(key)
	obj, err := s.Put(ctx, staging, r)
	if err != nil {
		return Object{}, err
	}
	defer func() { _ = s.Delete(context.WithoutCancel(ctx), staging) }()
	published := false
	err = guard(func() error {
		if published {
			return errors.New("published twice")
		}
		if _, err := s.Copy(ctx, staging, key); err != nil {
			return err
		}
		published = true
		return nil
	})
	switch {
	case err != nil:
		return Object{}, err
	case !published:
		return Object{}, fmt.Errorf("artifact: put %q: the guard neither published nor refused", key)
	}
	obj.Key = key
	return obj, nil
}

// s3CopyMaxBytes is the largest object one CopyObject may copy (S3's
// limit); a larger one is copied as a multipart upload of parts this size.
const s3CopyMaxBytes = 5 << 30

// Copy copies src to dst inside the bucket (one atomic write of dst: a
// reader of dst sees its previous object or the whole copy). The bytes never
// leave the S3 server. An object over s3CopyMaxBytes (an uploaded input may
// be) is copied part by part (UploadPartCopy), every part pinned to the
// ETag of the version the copy started from, and appears when the upload
// completes.
func (s *S3) Copy(ctx context.Context, src, dst string) (Object, error) {
	srcName, err := s.name(ctx, src)
	if err != nil {
		return Object{}, err
	}
	dstName, err := s.name(ctx, dst)
	if err != nil {
		return Object{}, err
	}
	source := s.bucket + "/" + *srcName // keys are [A-Za-z0-9._-/]: nothing to escape
	head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: srcName})
	if err != nil {
		return Object{}, s3Error("copy "+src+" to", dst, err)
	}
	if size := aws.ToInt64(head.ContentLength); size > s.copyMax() {
		err = s.copyParts(ctx, source, head.ETag, dstName, size)
	} else {
		_, err = s.client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &s.bucket, Key: dstName, CopySource: &source,
			CopySourceIfMatch: head.ETag})
	}
	if err != nil {
		return Object{}, s3Error("copy "+src+" to", dst, err)
	}
	return s.Stat(ctx, dst)
}

func (s *S3) copyMax() int64 {
	if s.copyPartBytes > 0 {
		return s.copyPartBytes
	}
	return s3CopyMaxBytes
}

// copyParts copies size bytes of source (at etag) to name as a multipart
// upload of copyMax-byte ranges; a failure aborts it, leaving name as it was.
func (s *S3) copyParts(ctx context.Context, source string, etag, name *string, size int64) error {
	mp, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: name})
	if err != nil {
		return err
	}
	var parts []s3types.CompletedPart
	for num, off := int32(1), int64(0); off < size && err == nil; num, off = num+1, off+s.copyMax() {
		rng := fmt.Sprintf("bytes=%d-%d", off, min(off+s.copyMax(), size)-1)
		var out *s3.UploadPartCopyOutput
		out, err = s.client.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: &s.bucket, Key: name, UploadId: mp.UploadId,
			PartNumber: aws.Int32(num), CopySource: &source, CopySourceRange: &rng, CopySourceIfMatch: etag})
		if err == nil {
			parts = append(parts, s3types.CompletedPart{ETag: out.CopyPartResult.ETag, PartNumber: aws.Int32(num)})
		}
	}
	if err == nil {
		_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: name,
			UploadId: mp.UploadId, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}})
	}
	if err != nil {
		_, _ = s.client.AbortMultipartUpload(context.WithoutCancel(ctx),
			&s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: name, UploadId: mp.UploadId})
	}
	return err
}

// Open returns a reader of the object at key as it is now: sequential reads
// stream one GET, random reads are ranged GETs, and every GET carries
// If-Match with the ETag the open saw, so a reader never mixes bytes of two
// objects. If the key is overwritten while open, reads fail (not a verdict).
func (s *S3) Open(ctx context.Context, key string) (Reader, Object, error) {
	name, err := s.name(ctx, key)
	if err != nil {
		return nil, Object{}, err
	}
	head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: name})
	if err != nil {
		return nil, Object{}, s3Error("open", key, err)
	}
	obj := Object{Key: key, Bytes: aws.ToInt64(head.ContentLength)}
	return &s3Reader{ctx: ctx, s: s, name: name, key: key, etag: head.ETag, size: obj.Bytes}, obj, nil
}

// Stat reports the object's size with a HEAD.
func (s *S3) Stat(ctx context.Context, key string) (Object, error) {
	name, err := s.name(ctx, key)
	if err != nil {
		return Object{}, err
	}
	head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: name})
	if err != nil {
		return Object{}, s3Error("stat", key, err)
	}
	return Object{Key: key, Bytes: aws.ToInt64(head.ContentLength)}, nil
}

// Delete removes the object. S3's DELETE succeeds on a missing key, so a
// HEAD first gives ErrNotFound as the interface promises.
func (s *S3) Delete(ctx context.Context, key string) error {
	if _, err := s.Stat(ctx, key); err != nil {
		return err
	}
	name, _ := s.name(ctx, key)
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: name}); err != nil {
		return s3Error("delete", key, err)
	}
	return nil
}

// Presign returns a URL that lets its holder GET (put false) or PUT
// exactly one key until ttl from now, signed with the store's credentials;
// the holder talks to the bucket, never to the control plane. The bucket
// judges expiry by its own clock, so a pinned control-plane clock does not
// move it.
func (s *S3) Presign(ctx context.Context, put bool, key string, ttl time.Duration) (string, error) {
	name, err := s.name(ctx, key)
	if err != nil {
		return "", err
	}
	expires := func(o *s3.PresignOptions) { o.Expires = ttl }
	if put {
		return s.presignPut(ctx, key, name, nil, ttl)
	}
	r, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: name}, expires)
	if err != nil {
		return "", fmt.Errorf("artifact: presign get %q: %w", key, err)
	}
	return r.URL, nil
}

// PresignCreate is Presign for a PUT that may only create key: the URL
// signs If-None-Match: * (protocol.OutputPutCondition), so its holder must
// send that header, and the bucket stores the key at most once and answers
// every later PUT 412 Precondition Failed. Grant issues output put grants
// this way, which makes an attempt's output key write-once from its first
// write.
func (s *S3) PresignCreate(ctx context.Context, key string, ttl time.Duration) (string, error) {
	name, err := s.name(ctx, key)
	if err != nil {
		return "", err
	}
	return s.presignPut(ctx, key, name, aws.String(protocol.OutputPutCreateOnly), ttl)
}

func (s *S3) presignPut(ctx context.Context, key string, name, ifNoneMatch *string, ttl time.Duration) (string, error) {
	r, err := s.presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: name, IfNoneMatch: ifNoneMatch},
		func(o *s3.PresignOptions) { o.Expires = ttl })
	if err != nil {
		return "", fmt.Errorf("artifact: presign put %q: %w", key, err)
	}
	return r.URL, nil
}

var _ grant.Issuer = (*S3)(nil)

// Grant is the S3 store as a grant.Issuer: presigned URLs of the bucket. A
// put grant is issued only for a Writable key (an input or an output, never
// a sealed copy), and one of an output key or an uploaded input only
// creates it (PresignCreate: the bucket refuses a second PUT); a get grant of an output key opens its sealed copy
// (ServedKey), the only bytes of an output ever served. now is not used:
// the bucket judges expiry by its own clock from the signing time.
func (s *S3) Grant(ctx context.Context, op grant.Op, key string, _ time.Time, ttl time.Duration) (string, error) {
	switch op {
	case grant.Put:
		if !Writable(key) {
			return "", fmt.Errorf("artifact: no put grant for %q: only input and output keys are written by grant holders", key)
		}
		if CreateOnly(key) {
			return s.PresignCreate(ctx, key, ttl)
		}
		return s.Presign(ctx, true, key, ttl)
	case grant.Get:
		return s.Presign(ctx, false, ServedKey(s, key), ttl)
	}
	return "", fmt.Errorf("artifact: unknown grant op %q", op)
}

// s3Reader is an open S3 object (see S3.Open).
type s3Reader struct {
	ctx  context.Context
	s    *S3
	name *string
	key  string
	etag *string
	size int64
	body io.ReadCloser // the sequential GET, opened on first Read
	off  int64
}

func (r *s3Reader) get(rng *string) (io.ReadCloser, error) {
	out, err := r.s.client.GetObject(r.ctx, &s3.GetObjectInput{Bucket: &r.s.bucket, Key: r.name, IfMatch: r.etag, Range: rng})
	if err != nil {
		return nil, s3Error("read", r.key, err)
	}
	return out.Body, nil
}

func (r *s3Reader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	if r.body == nil {
		b, err := r.get(nil)
		if err != nil {
			return 0, err
		}
		r.body = b
	}
	n, err := r.body.Read(p)
	r.off += int64(n)
	if errors.Is(err, io.EOF) && r.off < r.size {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (r *s3Reader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), r.size-off)
	body, err := r.get(aws.String(fmt.Sprintf("bytes=%d-%d", off, off+want-1)))
	if err != nil {
		return 0, err
	}
	defer body.Close()
	n, err := io.ReadFull(body, p[:want])
	if err == nil && want < int64(len(p)) {
		err = io.EOF
	}
	return n, err
}

func (r *s3Reader) Close() error {
	if r.body != nil {
		return r.body.Close()
	}
	return nil
}

// s3Error maps S3's "no such key" (404 on HEAD, NoSuchKey on GET) to
// ErrNotFound; anything else is an I/O failure the caller may retry.
func s3Error(op, key string, err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%w: %s", ErrNotFound, key)
		}
	}
	return fmt.Errorf("artifact: %s %q: %w", op, key, err)
}

// stagingKey is a fresh private key for an upload PutIf has not published.
func stagingKey(key string) string { return "staging/" + key + "." + rand.Text() }
