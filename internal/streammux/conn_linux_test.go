package streammux

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestBlockingFileIsRefused(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	defer r.Close()
	defer w.Close()
	// r is a blocking pipe's *os.File, whose Close does not end a pending Read.
	m, err := New(r, smallConfig(), true)
	if err == nil {
		m.Close() //nolint:errcheck // the test has failed already
		t.Fatal("New took a blocking file")
	}
	if !errors.Is(err, os.ErrNoDeadline) || !strings.Contains(err.Error(), "non-blocking") {
		t.Errorf("got %v, want os.ErrNoDeadline and how to fix it", err)
	}
}
