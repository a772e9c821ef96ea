// Package audit appends one JSON line per state-changing request to the audit log, fsynced
// before the change is applied. The log is shipped hourly to the WORM bucket quarry-audit.
package audit

import (
	"encoding/json"
	"os"
	"sync"
	"time"
)

type Record struct {
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id"`
	Principal string    `json:"principal"`
	SourceIP  string    `json:"source_ip"`
	Action    string    `json:"action"`
	Bucket    string    `json:"bucket"`
	Key       string    `json:"key,omitempty"`
	VersionID string    `json:"version_id,omitempty"`
	Approver  string    `json:"approver,omitempty"`
}

type Writer struct {
	mu   sync.Mutex
	file *os.File
}

func Open(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &Writer{file: f}, nil
}

// Append writes the record and syncs it to disk; the caller must not apply the change
// when it returns an error.
func (w *Writer) Append(rec Record) error {
	rec.Time = time.Now().UTC()
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.file.Write(append(line, '\n')); err != nil {
		return err
	}
	return w.file.Sync()
}
