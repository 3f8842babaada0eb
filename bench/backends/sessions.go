package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"time"
)

// sessionExecs starts warden serve on backend b and times execs of
// /bin/true and of Python's 1+1 (after a first one starts the
// interpreter) in one warm session.
func sessionExecs(warden, b string, n int) (trueMS, pyMS []float64, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(warden, "serve", "--backend", b, "--listen", addr)
	if err := srv.Start(); err != nil {
		return nil, nil, err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	base := "http://" + addr
	for i := 0; ; i++ {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 100 {
			return nil, nil, fmt.Errorf("warden serve did not answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var sess struct{ ID string }
	if err := post(base+"/v1/sessions", map[string]any{}, &sess); err != nil {
		return nil, nil, err
	}
	exec := base + "/v1/sessions/" + sess.ID + "/exec"
	if err := post(exec, map[string]any{"language": "python", "code": "1"}, nil); err != nil {
		return nil, nil, err
	}
	for i := 0; i < n; i++ {
		d, err := timed(func() error { return post(exec, map[string]any{"command": []string{"/bin/true"}}, nil) })
		if err != nil {
			return nil, nil, err
		}
		trueMS = append(trueMS, d)
		d, err = timed(func() error { return post(exec, map[string]any{"language": "python", "code": "1+1"}, nil) })
		if err != nil {
			return nil, nil, err
		}
		pyMS = append(pyMS, d)
	}
	return trueMS, pyMS, nil
}

func timed(f func() error) (float64, error) {
	start := time.Now()
	err := f()
	return float64(time.Since(start).Microseconds()) / 1000, err
}

func post(url string, body any, out any) error {
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}
