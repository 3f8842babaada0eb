package kubebed

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/rest"
)

// controllerUser is the identity the bed's agent-sandbox controller runs
// as: the service account its own manifests bind its ClusterRoles to, so
// that the bed runs it with exactly the RBAC an install grants it.
const (
	controllerNamespace = "agent-sandbox-system"
	controllerAccount   = "agent-sandbox-controller"
	controllerUser      = "system:serviceaccount:" + controllerNamespace + ":" + controllerAccount
)

// RouterUser is the identity of Bed.RouterConfig: the router's service
// account as deploy/ installs it, so that tests of the router's calls
// run with exactly the rights its Role grants once that is applied.
const (
	routerNamespace = "warden-system"
	RouterUser      = "system:serviceaccount:" + routerNamespace + ":warden-router"
)

// apiServer is a running kube-apiserver and the credentials to reach it.
type apiServer struct {
	proc            *process
	url             string
	caPEM           []byte
	adminToken      string
	controllerToken string
	routerToken     string
}

// startAPIServer runs kube-apiserver on loopback against etcdURL with
// RBAC authorization and the default admission plugins, and returns it
// once /readyz answers. Clients authenticate with static bearer tokens:
// an admin in system:masters (the tests and the simulated kubelet) and
// the controller's service account.
func startAPIServer(ctx context.Context, dir, bin, etcdURL string) (*apiServer, error) {
	ip := net.IPv4(127, 0, 0, 1)
	keys, err := newPKI(dir, ip)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	a := &apiServer{url: "https://127.0.0.1:" + strconv.Itoa(port), caPEM: keys.caPEM}
	tokens, err := a.writeTokens(dir)
	if err != nil {
		return nil, err
	}
	a.proc, err = startProcess(dir, "kube-apiserver", bin, []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + keys.certFile, "--tls-private-key-file=" + keys.keyFile,
		"--service-account-key-file=" + keys.saPubFile, "--service-account-signing-key-file=" + keys.saKeyFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC", "--token-auth-file=" + tokens,
		"--profiling=false", "--cert-dir=" + filepath.Join(dir, "certs"),
	}, nil)
	if err != nil {
		return nil, err
	}
	c, err := a.httpClient()
	if err != nil {
		return a, err
	}
	ready := func() bool { return httpOK(ctx, c, a.url+"/readyz", a.adminToken) }
	return a, waitStarted(ctx, a.proc, "kube-apiserver's /readyz", ready)
}

// writeTokens makes the bearer tokens and writes the API server's token
// file.
func (a *apiServer) writeTokens(dir string) (string, error) {
	for _, tok := range []*string{&a.adminToken, &a.controllerToken, &a.routerToken} {
		var err error
		if *tok, err = randomToken(); err != nil {
			return "", err
		}
	}
	const account = "%s,%s,%s,\"system:serviceaccounts,system:serviceaccounts:%s\"\n"
	lines := fmt.Sprintf("%s,kubebed-admin,kubebed-admin,\"system:masters\"\n", a.adminToken) +
		fmt.Sprintf(account, a.controllerToken, controllerUser, controllerUser, controllerNamespace) +
		fmt.Sprintf(account, a.routerToken, RouterUser, RouterUser, routerNamespace)
	path := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		return "", fmt.Errorf("writing the API server's token file: %w", err)
	}
	return path, nil
}

// randomToken is 128 random bits in hex.
func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a bearer token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// httpClient trusts only the bed's serving certificate.
func (a *apiServer) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(a.caPEM) {
		return nil, errors.New("parsing the bed's serving certificate")
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
}

// restConfig is a client-go configuration for token.
func (a *apiServer) restConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            a.url,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: a.caPEM},
		QPS:             -1,
	}
}

// writeKubeconfig writes a kubeconfig for token to path, for a program
// the bed runs (the controller reads it from $KUBECONFIG).
func (a *apiServer) writeKubeconfig(path, token string) error {
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubebed
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: kubebed
  user:
    token: %s
contexts:
- name: kubebed
  context:
    cluster: kubebed
    user: kubebed
current-context: kubebed
`, a.url, base64.StdEncoding.EncodeToString(a.caPEM), token)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return fmt.Errorf("writing a kubeconfig: %w", err)
	}
	return nil
}
