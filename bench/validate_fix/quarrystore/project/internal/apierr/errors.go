// Package apierr writes S3-style XML error responses.
package apierr

import (
	"encoding/xml"
	"log/slog"
	"net/http"
	"strconv"
)

type Code struct {
	Name   string
	Status int
}

var (
	NoSuchKey      = Code{"NoSuchKey", http.StatusNotFound}
	NoSuchBucket   = Code{"NoSuchBucket", http.StatusNotFound}
	NoSuchUpload   = Code{"NoSuchUpload", http.StatusNotFound}
	BadDigest      = Code{"BadDigest", http.StatusBadRequest}
	InvalidRequest = Code{"InvalidRequest", http.StatusBadRequest}
	EntityTooSmall = Code{"EntityTooSmall", http.StatusBadRequest}
	EntityTooLarge = Code{"EntityTooLarge", http.StatusBadRequest}
	InvalidPart    = Code{"InvalidPart", http.StatusBadRequest}
	AccessDenied   = Code{"AccessDenied", http.StatusForbidden}
	RequestTimeout = Code{"RequestTimeout", http.StatusBadRequest}
	SlowDown       = Code{"SlowDown", http.StatusServiceUnavailable}
	InternalError  = Code{"InternalError", http.StatusInternalServerError}
)

type body struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
}

// Write sends the error document. message is shown to the client; cause is only logged.
func Write(w http.ResponseWriter, r *http.Request, code Code, message string, cause error) {
	requestID := w.Header().Get("x-amz-request-id")
	if cause != nil {
		slog.Error("request failed", "request_id", requestID, "code", code.Name, "err", cause)
	}
	if code == SlowDown {
		w.Header().Set("Retry-After", strconv.Itoa(2))
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(code.Status)
	_ = xml.NewEncoder(w).Encode(body{Code: code.Name, Message: message, Resource: r.URL.Path, RequestID: requestID})
}

// Internal reports an unexpected failure without exposing it.
func Internal(w http.ResponseWriter, r *http.Request, cause error) {
	Write(w, r, InternalError, "We encountered an internal error. Please try again.", cause)
}
