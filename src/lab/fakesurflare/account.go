package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"surflare-watchdog/src/lab/fakes"
	"surflare-watchdog/src/lab/internet"
)

// Messages with the contract's wording.
const (
	msgAccountCheck = "Account check failed — Could not verify account status. Check network."
)

// apiTimeout bounds one account API request.
const apiTimeout = 5 * time.Second

// expiredSince is when the expired-session fault began (see internet).
func expiredSince(f fakes.Faults, modTime time.Time) time.Time {
	return internet.ExpiredSince(f, modTime)
}

// apiClient talks to the account API with a plain, unmarked socket: its
// packets go wherever the router's rules send them, so leftover tunnel
// rules with a dead proxy make the check fail, as with the real client.
func (e *env) apiClient() *http.Client {
	return &http.Client{Timeout: apiTimeout, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
}

func (e *env) apiURL(path string) (string, error) {
	base, err := url.Parse(e.info.APIURL)
	if err != nil {
		return "", fmt.Errorf("lab.json api_url %q: %w", e.info.APIURL, err)
	}
	return base.JoinPath(path).String(), nil
}

// apiError reads the API's error message, falling back to the status.
func apiError(resp *http.Response) string {
	var er internet.ErrorReply
	if json.NewDecoder(resp.Body).Decode(&er) == nil && er.Error != "" {
		return er.Error
	}
	return resp.Status
}

// accountCheck verifies the account before connecting: "" when fine,
// otherwise the message to print.
func (e *env) accountCheck(ctx context.Context, st fakes.State) string {
	u, err := e.apiURL("/v1/account")
	if err != nil {
		return err.Error()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+st.Token)
	resp, err := e.apiClient().Do(req)
	if err != nil {
		if e.info.Vendor.APIAccess == fakes.APITunnel && st.LoggedIn && !e.tokenExpired(st) {
			// E9: where the API answers only through the tunnel, the
			// client connects on its cached token (auth.dat) while that
			// is valid, as the shell watchdog's reconnects show; once it
			// has expired, connect fails the account check.
			return ""
		}
		return msgAccountCheck
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		msg := apiError(resp)
		if msg == internet.ErrTokenExpired {
			// E9: an expired auth.dat makes connect fail this way.
			return msgAccountCheck
		}
		return msg
	default:
		return msgAccountCheck
	}
	var ar internet.AccountReply
	if err := json.NewDecoder(resp.Body).Decode(&ar); err != nil {
		return msgAccountCheck
	}
	if ar.Subscription != "active" {
		return "subscription not active"
	}
	return ""
}

// errNetwork marks a login failure that is worth retrying.
var errNetwork = errors.New("network error")

// apiLogin asks the account API for a token.
func (e *env) apiLogin(ctx context.Context, email, password string) (string, error) {
	u, err := e.apiURL("/v1/login")
	if err != nil {
		return "", err
	}
	body, _ := json.Marshal(internet.LoginRequest{Email: email, Password: password})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.apiClient().Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNetwork, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s (HTTP %d)", apiError(resp), resp.StatusCode)
	}
	var lr internet.LoginReply
	if err := json.NewDecoder(resp.Body).Decode(&lr); err != nil || lr.Token == "" {
		return "", fmt.Errorf("%w: bad login reply", errNetwork)
	}
	return lr.Token, nil
}
