package vmbox

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/microvm"
)

// startVM boots the box's VM. The initramfs gi.open checked had a name,
// but QEMU's launcher binds it by that name later: should another build's
// warden remove it in between (it prunes at its start), the bind fails.
// Then, once, gi names the file again from its held bytes and the boot is
// retried; any other failure, or a second one, is returned.
func (b *box) startVM(cfg microvm.Config, gi *guestInit) (*microvm.VM, error) {
	// The VM outlives ctx (a session's); Start's own boot timeout bounds it.
	vm, err := microvm.Start(context.Background(), cfg)
	if err == nil || !lostName(cfg.InitrdFile) {
		return vm, err
	}
	initrd, oerr := gi.open()
	if oerr != nil {
		return nil, errors.Join(err, fmt.Errorf("naming the guest initramfs again: %w", oerr))
	}
	defer b.closeLogged(initrd, "the guest initramfs")
	cfg.InitrdFile = initrd
	return microvm.Start(context.Background(), cfg)
}

// lostName says the file f is open on has no name left (its last link
// was removed); an error reading that says no, so the boot's own error is
// returned.
func lostName(f *os.File) bool {
	var st unix.Stat_t
	return unix.Fstat(int(f.Fd()), &st) == nil && st.Nlink == 0
}
