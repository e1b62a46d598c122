package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrExists reports that a create-only write found an object at its key.
var ErrExists = errors.New("artifact: object exists")

// uploadsPrefix starts the keys of inputs a buyer uploads before naming
// them in a job (POST /v1/inputs): `uploads/{buyer_id}/{input_id}`.
const uploadsPrefix = "uploads/"

// UploadKey is the key of a buyer's uploaded input. The buyer's id is part
// of the key, so one buyer's input_id names nothing of another buyer's.
// It is a valid key whenever both are valid segments.
func UploadKey(buyerID, inputID string) string { return uploadsPrefix + buyerID + "/" + inputID }

// IsUploadKey reports whether key is an uploaded input's key: such a key
// is create-only for every grant holder.
func IsUploadKey(key string) bool { return strings.HasPrefix(key, uploadsPrefix) }

// Creator is a Store that writes a key create-only (FS). On S3 buyers
// write uploads with presigned create-only URLs, never through the
// control plane.
type Creator interface {
	Store
	// Create is Put that fails with ErrExists, changing nothing, when key
	// has an object.
	Create(ctx context.Context, key string, r io.Reader) (Object, error)
}

// Linker is a Store that makes one key hold another's object without the
// bytes passing through the caller: a hard link (FS), a server-side copy
// (S3).
type Linker interface {
	Store
	// Link makes dst hold the object at src, replacing dst's whole;
	// ErrNotFound when src has no object.
	Link(ctx context.Context, src, dst string) (Object, error)
}

var (
	_ Creator = (*FS)(nil)
	_ Linker  = (*FS)(nil)
	_ Linker  = (*S3)(nil)
)

// Link is Copy: S3 as a Linker.
func (s *S3) Link(ctx context.Context, src, dst string) (Object, error) { return s.Copy(ctx, src, dst) }

// Create is Put that only creates: it publishes the content at key only if
// key has no object, atomically with the check (a hard link of the
// finished temporary file, which fails when the name exists), and
// otherwise fails with ErrExists and leaves the key's object as it was.
func (s *FS) Create(ctx context.Context, key string, r io.Reader) (Object, error) {
	return s.put(ctx, key, r, nil, true)
}

// Link makes dst name the object at src (a hard link: no byte is copied),
// replacing any object at dst. Objects are never written in place (a Put
// renames a new file over the name), so the two keys keep the same bytes
// until one of them is replaced or deleted.
func (s *FS) Link(ctx context.Context, src, dst string) (Object, error) {
	srcName, err := s.name(ctx, src)
	if err != nil {
		return Object{}, err
	}
	fi, err := s.lstatRegular(src, srcName)
	if err != nil {
		return Object{}, err
	}
	// Link to a temporary name, then rename over dst: a reader of dst sees
	// its previous object or the linked one.
	dstName, dir, tmp, err := s.tempBeside(ctx, "link", dst)
	if err != nil {
		return Object{}, err
	}
	if err := s.root.Link(srcName, tmp); err != nil {
		return Object{}, opError("link "+src+" to", dst, err)
	}
	if err := s.root.Rename(tmp, dstName); err != nil {
		_ = s.root.Remove(tmp)
		return Object{}, fmt.Errorf("artifact: link %q to %q: %w", src, dst, err)
	}
	if err := s.syncDirs(dir); err != nil {
		return Object{}, fmt.Errorf("artifact: link %q to %q: sync directory: %w", src, dst, err)
	}
	return Object{Key: dst, Bytes: fi.Size()}, nil
}

// Hash reads the object at key to its end, hashing it as it streams (a
// fixed buffer, whatever the size), and returns its size and SHA-256.
func Hash(ctx context.Context, st Store, key string) (Object, error) {
	r, obj, err := st.Open(ctx, key)
	if err != nil {
		return Object{}, err
	}
	defer r.Close()
	h := sha256.New()
	n, err := copyPooled(h, ctxReader{ctx: ctx, r: r})
	if err != nil {
		return Object{}, fmt.Errorf("artifact: hash %q: %w", key, err)
	}
	obj.Bytes, obj.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	return obj, nil
}
