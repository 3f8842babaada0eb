package kubeback_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/warden-sandbox/warden/internal/kubeback"
	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/kubebed/bedpod"
	"github.com/warden-sandbox/warden/internal/podclaim"
)

// apiKey is the served API's key in testServe; its tenant is the first
// 16 hex digits of its SHA-256, as the server derives it.
const apiKey = "kubeserve-test-key"

// testServe runs warden serve --backend kubernetes itself (the full
// build, as warden-server is), configured by its flags alone: a
// kubeconfig of the router's service account, the router key and API
// key files; then creates a session over HTTP, execs in it, and deletes
// it, whose claim then goes.
func testServe(ctx context.Context, t *testing.T, bed *kubebed.Bed, admin *podclaim.Claimer, bin, dir string) {
	base := startServe(t, bin, dir, "127.0.0.1:0").url
	var created struct{ ID string }
	call(ctx, t, http.MethodPost, base+"/v1/sessions", `{}`, http.StatusCreated, &created)
	var res struct{ Stdout string }
	call(ctx, t, http.MethodPost, base+"/v1/sessions/"+created.ID+"/exec", `{"command":["sh","-c","echo hi; id -u"]}`, http.StatusOK, &res)
	if want := fmt.Sprintf("hi\n%d\n", bedpod.InitUID); res.Stdout != want {
		t.Errorf("exec over HTTP: stdout %q, want %q (hi and the Pod's uid)", res.Stdout, want)
	}
	if _, err := admin.Find(ctx, kubeback.OwnerLabel(routerKey, tenant()), created.ID); err != nil {
		t.Errorf("the session's claim under its key's tenant %s: %v", tenant(), err)
	}
	call(ctx, t, http.MethodDelete, base+"/v1/sessions/"+created.ID, "", http.StatusNoContent, nil)
	if _, err := admin.Find(ctx, kubeback.OwnerLabel(routerKey, tenant()), created.ID); !errors.Is(err, podclaim.ErrNotFound) {
		t.Errorf("after DELETE the claim: got %v, want ErrNotFound", err)
	}
}

// serveFiles builds warden (the full build, as warden-server is) into a
// directory with the files warden serve is configured by: the router
// key, the API key and a kubeconfig of the router's service account.
func serveFiles(t *testing.T, bed *kubebed.Bed) (bin, dir string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "warden")
	build := exec.Command("go", "build", "-o", bin, "github.com/warden-sandbox/warden/cmd/warden")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building warden: %v: %s", err, out)
	}
	files := map[string][]byte{"router-key": routerKey, "api-keys": []byte(apiKey + "\n")}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bed"] = &clientcmdapi.Cluster{Server: bed.RouterConfig.Host, CertificateAuthorityData: bed.RouterConfig.CAData}
	kc.AuthInfos["router"] = &clientcmdapi.AuthInfo{Token: bed.RouterConfig.BearerToken}
	kc.Contexts["bed"] = &clientcmdapi.Context{Cluster: "bed", AuthInfo: "router"}
	kc.CurrentContext = "bed"
	if err := clientcmd.WriteToFile(*kc, filepath.Join(dir, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	return bin, dir
}

// served is a running warden serve.
type served struct {
	url string
	// kill ends it with SIGKILL, as a crash or an evicted Pod would, and
	// waits for it to exit.
	kill func()
}

// startServe starts warden serve on the bed from dir's files, listening
// on listen with the extra flags, and returns it once it serves; it is
// stopped (SIGTERM, then SIGKILL) at the test's end.
func startServe(t *testing.T, bin, dir, listen string, extra ...string) served {
	t.Helper()
	args := append([]string{"serve", "--backend", "kubernetes", "--listen", listen,
		"--api-key-file", filepath.Join(dir, "api-keys"), "--kube-router-key", filepath.Join(dir, "router-key"),
		"--kubeconfig", filepath.Join(dir, "kubeconfig"), "--kube-namespace", ns, "--state-dir", "none"}, extra...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // it may have exited already
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill() // bounded: it would not stop
			<-exited
		}
	})
	lines := make(chan string, 1)
	var log bytes.Buffer
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if _, url, ok := strings.Cut(sc.Text(), "serving on "); ok {
				lines <- strings.Fields(url)[0]
			}
		}
		_ = cmd.Wait() // its log says why it ended
	}()
	kill := func() {
		_ = cmd.Process.Kill() // it may have exited already
		<-exited
	}
	select {
	case url := <-lines:
		return served{url: url, kill: kill}
	case <-exited:
		t.Fatalf("warden serve ended before serving: %s", log.String())
	case <-time.After(waitLong):
		t.Fatal("warden serve did not start serving in time")
	}
	return served{}
}

// call sends a request with the API key and decodes a reply of status
// want into out.
func call(ctx context.Context, t *testing.T, method, url, body string, want int, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d (%s), want %d", method, url, resp.StatusCode, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatal(fmt.Errorf("decoding %s %s's answer %q: %w", method, url, data, err))
		}
	}
}
