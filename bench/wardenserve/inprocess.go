package wardenserve

import (
	"fmt"
	"log"
	"net"
	"net/http"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/server"
)

// InProcess is the API served from the benchmark's own process on a
// loopback port, with no keys, over the native backend: for figures
// that must count the server's CPU as this process's own.
type InProcess struct {
	Client
	mgr *sandbox.Manager
	hs  *http.Server
}

// StartInProcess serves a Manager made with cfg.
func StartInProcess(cfg sandbox.Config) (*InProcess, error) {
	mgr := sandbox.NewManager(sandbox.Native{}, cfg)
	srv, err := server.New(mgr, server.Config{AllowAnonymous: true})
	if err != nil {
		if cerr := mgr.Close(); cerr != nil {
			log.Printf("closing the manager: %v", cerr)
		}
		return nil, fmt.Errorf("starting the API: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if cerr := mgr.Close(); cerr != nil {
			log.Printf("closing the manager: %v", cerr)
		}
		return nil, fmt.Errorf("listening for the API: %w", err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go func() { _ = hs.Serve(ln) }() // ends with ErrServerClosed at Close
	c := Client{Base: "http://" + ln.Addr().String(), HTTP: http.DefaultClient}
	return &InProcess{Client: c, mgr: mgr, hs: hs}, nil
}

// Close stops serving and ends every session, logging what fails.
func (p *InProcess) Close() {
	if err := p.hs.Close(); err != nil {
		log.Printf("closing the API's listener: %v", err)
	}
	if err := p.mgr.Close(); err != nil {
		log.Printf("ending the API's sessions: %v", err)
	}
}
