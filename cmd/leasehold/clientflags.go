package main

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// How a client command reaches the cluster and proves who it is: the
// global flags --endpoints, --auth-token and --token-file, and their
// environment variables. A bearer token never appears in a message: they
// name where it came from instead.

// The environment variables of the bearer token.
const (
	envAuthToken = "LEASEHOLD_AUTH_TOKEN"
	envTokenFile = "LEASEHOLD_TOKEN_FILE"
)

// tokenHelp is what every message about a missing token suggests.
const tokenHelp = "give one with --auth-token TOKEN, the variable " + envAuthToken +
	", or --token-file FILE (variable " + envTokenFile + ")"

// bearerToken is the token to send, and where it came from (for messages):
// the first of --auth-token, --token-file, $LEASEHOLD_AUTH_TOKEN and
// $LEASEHOLD_TOKEN_FILE that is set, so the command line wins over the
// environment and, in each, a token over a file. No token is "", "".
func (g *globals) bearerToken() (token, source string, err error) {
	if g.authToken != "" && g.tokenFile != "" {
		return "", "", usagef("give --auth-token or --token-file, not both")
	}
	switch {
	case g.authToken != "":
		token, source = g.authToken, "--auth-token"
	case g.tokenFile != "":
		source = "--token-file " + g.tokenFile
		token, err = readToken(g.tokenFile, source)
	case os.Getenv(envAuthToken) != "":
		token, source = os.Getenv(envAuthToken), envAuthToken
	case os.Getenv(envTokenFile) != "":
		path := os.Getenv(envTokenFile)
		source = envTokenFile + "=" + path
		token, err = readToken(path, source)
	default:
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", "", usagef("%s: the token is empty; %s", source, tokenHelp)
	}
	if strings.IndexFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return "", "", usagef("%s: the token holds a space or a control character (it is not shown here); "+
			"give it as 'leasehold auth token' printed it", source)
	}
	return token, source, nil
}

// readToken reads a bearer token from a file: its first line. source
// names the flag or variable that gave the path.
func readToken(path, source string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", usagef("%s: %v", source, err)
	}
	return strings.SplitN(string(b), "\n", 2)[0], nil
}

// endpointURLs are the nodes of --endpoints (or $LEASEHOLD_ENDPOINTS): URLs,
// or host:port meaning http://host:port — https:// when --ca-file or
// --cert-file is given, as etcdctl does.
func (g *globals) endpointURLs() ([]string, error) {
	scheme := "http://"
	if g.caFile != "" || g.certFile != "" {
		scheme = "https://"
	}
	var urls []string
	for _, e := range strings.Split(g.endpoints, ",") {
		e = strings.TrimRight(strings.TrimSpace(e), "/")
		if e == "" {
			continue
		}
		u, err := endpointURL(e, scheme)
		if err != nil {
			return nil, usagef("--endpoints %q: %v; give URLs such as http://127.0.0.1:7420, or host:port", e, err)
		}
		urls = append(urls, u)
	}
	if len(urls) == 0 {
		return nil, usagef("--endpoints is empty: give the nodes' URLs, such as http://127.0.0.1:7420")
	}
	return urls, nil
}

// endpointURL is one endpoint as a URL, scheme added if it has none.
func endpointURL(e, scheme string) (string, error) {
	if !strings.Contains(e, "://") {
		e = scheme + e
	}
	u, err := url.Parse(e)
	switch {
	case err != nil:
		return "", err
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("scheme %q: want http or https", u.Scheme)
	case u.Host == "" || u.Port() == "" && strings.HasSuffix(u.Host, ":"):
		return "", fmt.Errorf("no host:port")
	case u.Path != "" || u.RawQuery != "" || u.User != nil:
		return "", fmt.Errorf("want only a scheme, a host and a port")
	}
	return e, nil
}
