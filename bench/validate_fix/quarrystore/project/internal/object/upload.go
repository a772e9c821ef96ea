// Package object implements the object and multipart handlers of the S3 API.
package object

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"

	"git.internal/storage/quarrystore/internal/apierr"
	"git.internal/storage/quarrystore/internal/audit"
	"git.internal/storage/quarrystore/internal/server"
)

const (
	MinPartSize      = 8 << 20   // 8 MiB, every part but the last
	MaxPartSize      = 512 << 20 // 512 MiB
	MaxParts         = 10_000
	MaxSinglePutSize = 5 << 30 // 5 GiB
	checksumHeader   = "x-amz-checksum-sha256"
)

type Handler struct {
	Store Store
	Meta  Metadata
	Audit *audit.Writer
}

// PutObject streams the body to the storage nodes while hashing it, and commits the
// object only when the SHA-256 digest matches the one the client sent.
func (h *Handler) PutObject(w http.ResponseWriter, r *http.Request, bucket, key string) {
	want := r.Header.Get(checksumHeader)
	if want == "" {
		apierr.Write(w, r, apierr.InvalidRequest, "x-amz-checksum-sha256 is required", nil)
		return
	}
	if r.ContentLength > MaxSinglePutSize {
		apierr.Write(w, r, apierr.EntityTooLarge, "use a multipart upload above 5 GiB", nil)
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), server.DataCallTimeout)
	defer cancel()
	hash := sha256.New()
	staged, err := h.Store.Stage(ctx, bucket, key, io.TeeReader(minRate(r.Body), hash))
	if err != nil {
		apierr.Internal(w, r, err)
		return
	}
	got := base64.StdEncoding.EncodeToString(hash.Sum(nil))
	if got != want {
		_ = h.Store.Discard(ctx, staged)
		apierr.Write(w, r, apierr.BadDigest, "the SHA-256 you specified did not match what we received", nil)
		return
	}
	version, err := h.Store.Commit(ctx, staged, map[string]string{checksumHeader: got})
	if err != nil {
		apierr.Internal(w, r, err)
		return
	}
	w.Header().Set(checksumHeader, got)
	w.Header().Set("x-amz-version-id", version)
	w.WriteHeader(http.StatusOK)
}

// CompleteMultipartUpload checks the part sizes before stitching the parts together.
func (h *Handler) CompleteMultipartUpload(w http.ResponseWriter, r *http.Request, bucket, key, uploadID string) {
	mctx, cancel := context.WithTimeout(r.Context(), server.MetadataCallTimeout)
	defer cancel()
	parts, err := h.Meta.ListParts(mctx, uploadID)
	if err != nil {
		apierr.Internal(w, r, err)
		return
	}
	if len(parts) > MaxParts {
		apierr.Write(w, r, apierr.InvalidPart, fmt.Sprintf("at most %d parts", MaxParts), nil)
		return
	}
	for i, part := range parts {
		if part.Size > MaxPartSize {
			apierr.Write(w, r, apierr.EntityTooLarge, "part larger than 512 MiB", nil)
			return
		}
		if part.Size < MinPartSize && i != len(parts)-1 {
			apierr.Write(w, r, apierr.EntityTooSmall, "", nil)
			return
		}
	}
	ctx, cancel2 := context.WithTimeout(r.Context(), server.DataCallTimeout)
	defer cancel2()
	if err := h.Store.Stitch(ctx, bucket, key, parts); err != nil {
		apierr.Internal(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// newUploadID returns 128 random bits, hex encoded.
func newUploadID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
