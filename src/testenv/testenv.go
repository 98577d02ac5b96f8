// Package testenv finds what tests need outside their own package: the
// repository root (the directory holding go.mod) and the golden fixtures
// produced by the real OpenWrt tools, which live beside the repository in
// ../shared/fixtures. One copy of the lookup, so every test agrees on it.
package testenv

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// Root returns the repository root, or "" when no go.mod is found above
// the working directory.
func Root() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// RepoRoot is Root for a test: it fails the test when there is no root.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root := Root()
	if root == "" {
		t.Fatal("no go.mod above the test directory")
	}
	return root
}

// FixturesDir returns ../shared/fixtures/KIND beside the repository root,
// or "" when it is absent (for fuzz seed corpora, which may do without).
func FixturesDir(kind string) string {
	root := Root()
	if root == "" {
		return ""
	}
	dir := filepath.Join(root, "..", "shared", "fixtures", kind)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return ""
	}
	return dir
}

// Fixtures is FixturesDir for a test: it skips the test, saying where it
// looked, when the fixtures are not checked out beside the repository.
func Fixtures(t testing.TB, kind string) string {
	t.Helper()
	dir := FixturesDir(kind)
	if dir == "" {
		t.Skipf("golden fixtures not found (want ../shared/fixtures/%s beside the repository root)", kind)
	}
	return dir
}

// CaptureLog installs a default slog logger (debug level, text) writing into
// the returned buffer, as the daemon installs its own at start, and puts the
// previous one back when the test ends. Packages look their logger up at each
// use, so this shows what they really log, at which level and subsystem.
func CaptureLog(t testing.TB) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return &buf
}
