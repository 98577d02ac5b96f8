package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A descriptor handed to a child is found as the same open file; the same
// file opened again by the parent only as the same inode.
func TestSharedFDsTellsInheritedFromReopened(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	passed, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer passed.Close()
	reopened, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	child := exec.Command("sleep", "30")
	child.ExtraFiles = []*os.File{passed} // fd 3 in the child
	if err := child.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()

	shared, err := SharedFDs(child.Process.Pid, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var same, inodeOnly bool
	for _, s := range shared {
		if s.HolderFD != 3 {
			continue
		}
		switch {
		case s.OwnerFD == int(passed.Fd()) && s.SameFile:
			same = true
		case s.OwnerFD == int(reopened.Fd()) && !s.SameFile:
			inodeOnly = true
		}
	}
	if !same || !inodeOnly {
		t.Errorf("child fd 3: inherited found %v, reopened told apart %v; shared: %v", same, inodeOnly, shared)
	}
}
