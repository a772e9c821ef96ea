package object

import (
	"context"
	"net/http"
	"time"

	"git.internal/storage/quarrystore/internal/apierr"
	"git.internal/storage/quarrystore/internal/audit"
	"git.internal/storage/quarrystore/internal/server"
)

// NoncurrentRetention is how long a version stays after it stopped being current.
const NoncurrentRetention = 30 * 24 * time.Hour

// DeleteObject adds a delete marker, or removes one version when versionID is set.
func (h *Handler) DeleteObject(w http.ResponseWriter, r *http.Request, bucket, key, versionID string) {
	ctx, cancel := context.WithTimeout(r.Context(), server.MetadataCallTimeout)
	defer cancel()
	principal := PrincipalFrom(r.Context())

	if versionID != "" {
		lock, err := h.Meta.Lock(ctx, bucket, key, versionID)
		if err != nil {
			apierr.Internal(w, r, err)
			return
		}
		if lock.Mode == LockCompliance && time.Now().Before(lock.RetainUntil) {
			apierr.Write(w, r, apierr.AccessDenied, "object is locked", nil)
			return
		}
		if lock.Mode == LockGovernance && time.Now().Before(lock.RetainUntil) &&
			!(principal.Can("s3:BypassGovernanceRetention") && r.Header.Get("x-amz-bypass-governance-retention") == "true") {
			apierr.Write(w, r, apierr.AccessDenied, "object is locked", nil)
			return
		}
	}

	rec := audit.Record{
		RequestID: w.Header().Get("x-amz-request-id"),
		Principal: principal.ID,
		SourceIP:  r.RemoteAddr,
		Action:    "s3:DeleteObject",
		Bucket:    bucket,
		Key:       key,
		VersionID: versionID,
	}
	if err := h.Audit.Append(rec); err != nil {
		apierr.Write(w, r, apierr.SlowDown, "please retry", err)
		return
	}

	if versionID == "" {
		err := h.Meta.PutDeleteMarker(ctx, bucket, key, time.Now().UTC())
		if err != nil {
			apierr.Internal(w, r, err)
			return
		}
	} else if err := h.Meta.MarkNoncurrent(ctx, bucket, key, versionID, time.Now().UTC()); err != nil {
		apierr.Internal(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ReapNoncurrent purges the versions that have been noncurrent for longer than the retention.
func (h *Handler) ReapNoncurrent(ctx context.Context, now time.Time) (int, error) {
	return h.Meta.PurgeNoncurrentBefore(ctx, now.Add(-NoncurrentRetention), 10_000)
}
