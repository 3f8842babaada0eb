package kubebed_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/kubebed/bedpod"
)

// testPodExit runs a Pod, makes its stand-in exit, and waits for the
// simulated kubelet to report the Pod Failed with its container
// terminated by that exit code, as a Pod deleted or crashed under a
// session must be seen dead.
func testPodExit(t *testing.T, bed *kubebed.Bed) {
	ctx, cancel := context.WithTimeout(context.Background(), bedpod.WaitLong)
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
	bedpod.WaitFor(t, "the Pod to run", func() bool {
		got, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		ip = got.Status.PodIP
		return err == nil && got.Status.Phase == corev1.PodRunning
	})
	bedpod.AskExit(ctx, "http://"+ip+":8080")
	var got *corev1.Pod
	bedpod.WaitFor(t, "the Pod to be reported Failed", func() bool {
		var err error
		got, err = pods.Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.PodFailed
	})
	cs := got.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != bedpod.ExitCode || cs[0].Ready {
		t.Errorf("Failed Pod's container statuses: got %+v, want one terminated with exit code %d, not ready", cs, bedpod.ExitCode)
	}
}
