package apk

import (
	"errors"
	"testing"
)

func FuzzRead(f *testing.F) {
	if b, err := demo().Build(); err == nil {
		f.Add(b)
	}
	small := &Package{Name: "a", Version: "1", Arch: NoArch, Files: []File{{Path: "/a", Mode: 0o644, Data: []byte("x")}}}
	if b, err := small.Build(); err == nil {
		f.Add(b)
		if a, err := Read(b); err == nil {
			raw := appendBlock([]byte("ADB.pckg"), blockADB, a.ADB)
			f.Add(raw)
		}
	}
	f.Add([]byte("ADBd"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Read(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not marked malformed: %v", err)
			}
			return
		}
		_ = checkNames(a)
	})
}

// checkNames touches every field a reader of an Archive uses.
func checkNames(a *Archive) int {
	n := len(a.Name) + len(a.Version) + len(a.Depends) + len(a.Dirs)
	for _, f := range a.Files {
		n += len(f.Path) + len(f.Data)
	}
	return n
}
