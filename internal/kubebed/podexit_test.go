package kubebed_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warden-sandbox/warden/internal/kubebed"
)

// testPodExit runs a Pod, makes its stand-in exit, and waits for the
// simulated kubelet to report the Pod Failed with its container
// terminated by that exit code, as a Pod deleted or crashed under a
// session must be seen dead.
func testPodExit(t *testing.T, bed *kubebed.Bed) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	pods := bed.Clientset.CoreV1().Pods("default")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "exits", Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{
				Name: "stub", Image: "warden.invalid/stub",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			}},
		},
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Pod %s: %v", pod.Name, err)
	}
	t.Cleanup(func() { _ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{}) })
	var ip string
	waitFor(t, "the Pod to run", func() bool {
		got, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		ip = got.Status.PodIP
		return err == nil && got.Status.Phase == corev1.PodRunning
	})
	killStub(ctx, "http://"+ip+":8080"+stubExitPath)
	var got *corev1.Pod
	waitFor(t, "the Pod to be reported Failed", func() bool {
		var err error
		got, err = pods.Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.PodFailed
	})
	cs := got.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != stubExitCode || cs[0].Ready {
		t.Errorf("Failed Pod's container statuses: got %+v, want one terminated with exit code %d, not ready", cs, stubExitCode)
	}
}

// killStub asks a stand-in to exit; the request fails as it does.
func killStub(ctx context.Context, url string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}
