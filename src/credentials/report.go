package credentials

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"surflare-watchdog/src/runfiles"
)

// StatusReport is `credentials status`: StatusInfo plus the encrypted file
// setup-auth wrote, which only the systemd unit can decrypt for the
// daemon, so a shell sees it but not its password.
type StatusReport struct {
	StatusInfo
	EncryptedFile string `json:"encrypted_file,omitempty"`
}

// Report is Status, with encryptedFile (setup-auth's output) noted when it
// exists and the password does not come from systemd already.
func Report(opts Options, encryptedFile string) StatusReport {
	st := StatusReport{StatusInfo: Status(opts)}
	if st.Source != SourceSystemd {
		if _, err := os.Stat(encryptedFile); err == nil {
			st.EncryptedFile = encryptedFile
		}
	}
	return st
}

// explained: a shell cannot read the systemd credential, only the daemon's
// unit can; an encrypted file explains a password that is merely absent
// here (not one that is unsafe or unreadable).
func (st StatusReport) explained() bool {
	return !st.Present && st.Source == "" && st.EncryptedFile != ""
}

// Usable reports whether the daemon will find a username and a password.
func (st StatusReport) Usable() bool {
	return (st.Present && st.Problem == "") || (st.explained() && st.Username != "")
}

// WriteText prints the report for people; never the password.
func (st StatusReport) WriteText(w io.Writer) {
	switch {
	case st.Present:
		fmt.Fprintf(w, "password: stored (%s, %s)\n", st.Source, st.Path)
	case st.Source != "":
		fmt.Fprintf(w, "password: not usable (%s, %s)\n", st.Source, st.Path)
	case st.explained():
		fmt.Fprintf(w, "password: encrypted for systemd in %s (the unit's LoadCredentialEncrypted= line hands it to the daemon)\n", st.EncryptedFile)
	default:
		fmt.Fprintf(w, "password: missing\n")
	}
	user := st.Username
	if user == "" {
		user = "(not set)"
	}
	fmt.Fprintf(w, "username: %s\n", user)
	switch {
	case st.Problem != "" && !st.explained():
		fmt.Fprintf(w, "problem:  %s\n", st.Problem)
	case st.Username == "":
		fmt.Fprintf(w, "problem:  no username (set it with `surflare-watchdog credentials set --username EMAIL`)\n")
	}
}

// The drop-in setup-auth writes for the systemd unit.
const (
	DefaultDropInDir = "/etc/systemd/system/surflare-watchdog.service.d"
	DropInName       = "10-surflare-credential.conf"
)

// WriteDropIn writes the unit drop-in that loads the encrypted credential
// (unitLine, EncryptResult.UnitLine) into dir and returns its path. The
// shipped unit cannot name the credential itself: systemd refuses to start
// a unit whose LoadCredentialEncrypted= file is missing, and most laptops
// use /etc/surflare/credentials instead; a drop-in adds it only where
// setup-auth made one.
func WriteDropIn(dir, unitLine string) (string, error) {
	path := filepath.Join(dir, DropInName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("systemd drop-in: %w", err)
	}
	body := "# Written by surflare-watchdog setup-auth: systemd decrypts the password for the daemon.\n[Service]\n" + unitLine + "\n"
	if err := runfiles.WriteFile(path, []byte(body)); err != nil {
		return "", fmt.Errorf("systemd drop-in: %w", err)
	}
	return path, nil
}
