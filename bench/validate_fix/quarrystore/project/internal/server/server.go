// Package server wires the public S3 listener, the internal health listener and the
// client used to reach the storage nodes.
package server

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"time"
)

const (
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = 120 * time.Second
	MaxHeaderBytes    = 64 << 10
	ShutdownGrace     = 30 * time.Second

	DataCallTimeout     = 30 * time.Second
	MetadataCallTimeout = 2 * time.Second
)

// PublicTLSConfig is the TLS configuration of the S3 listener on :443.
func PublicTLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		},
	}
}

// NewPublicServer serves the S3 API over HTTPS only.
func NewPublicServer(handler http.Handler, cert tls.Certificate) *http.Server {
	return &http.Server{
		Addr:              ":443",
		Handler:           hsts(handler),
		TLSConfig:         PublicTLSConfig(cert),
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}

// NewInternalServer serves /healthz and /metrics in plain HTTP on the internal port.
func NewInternalServer(health, metrics http.Handler) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/healthz", health)
	mux.Handle("/metrics", metrics)
	return &http.Server{Addr: ":9090", Handler: mux, ReadHeaderTimeout: ReadHeaderTimeout}
}

// NodeClient talks to the storage nodes with mutual TLS and the internal CA.
func NodeClient(clientCert tls.Certificate, caFile string) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &http.Client{
		Timeout: DataCallTimeout,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{
				Certificates: []tls.Certificate{clientCert},
				RootCAs:      pool,
				MinVersion:   tls.VersionTLS13,
			},
			MaxIdleConnsPerHost: 64,
		},
	}, nil
}

func hsts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", "max-age=31536000")
		next.ServeHTTP(w, r)
	})
}
