package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/leapcount/leapcount/node"
)

// asker is what the operator subcommands (status, hotkeys) share: the node's HTTP
// address and token, from flags or the node's own environment variables, and a GET
// with a deadline.
type asker struct {
	addr      string
	token     string
	tokenFile string
	timeout   time.Duration
}

// flags defines --http, --token-file and --timeout on fs.
func (a *asker) flags(fs *flag.FlagSet) {
	fs.StringVar(&a.addr, "http", node.DefaultHTTPAddr, "the node's HTTP address (a wildcard host means this host)")
	fs.StringVar(&a.tokenFile, "token-file", "", "a file holding the node's --token (or LEAPCOUNT_TOKEN, LEAPCOUNT_TOKEN_FILE)")
	fs.DurationVar(&a.timeout, "timeout", 5*time.Second, "how long to wait for each answer")
}

// resolve fills what the flags left unset from the environment the node reads, and
// reads the token file.
func (a *asker) resolve(fs *flag.FlagSet, env func(string) (string, bool)) error {
	if v, ok := env(EnvName("http")); ok && !flagGiven(fs, "http") {
		a.addr = v
	}
	if v, ok := env(EnvName("token-file")); ok && a.tokenFile == "" {
		a.tokenFile = v
	}
	if a.tokenFile != "" {
		b, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %v", err)
		}
		a.token = strings.TrimRight(string(b), "\r\n")
	} else if v, ok := env(EnvName("token")); ok {
		a.token = v
	}
	host, port, err := net.SplitHostPort(a.addr)
	if err != nil {
		return fmt.Errorf("invalid --http %q: want host:port", a.addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	a.addr = net.JoinHostPort(host, port)
	return nil
}

// get decodes the JSON answer of GET path into out.
func (a *asker) get(path string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.addr+path, nil)
	if err != nil {
		return err
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, e.Error)
		}
		return fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	return json.Unmarshal(body, out)
}
