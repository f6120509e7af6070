package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// newHealth is `leasehold health`: a probe for supervisors (Docker's
// HEALTHCHECK, scripts) that needs nothing but the binary itself.
func newHealth(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Exit 0 if the node at --endpoints is ready (has a leader and serves), 7 if not",
		Long: "Asks the first node of --endpoints for /readyz: ready means it has a leader\n" +
			"and applies the log. Exits 0 and prints the node's answer if it is ready, 7\n" +
			"(unavailable) if it is not or does not answer within --timeout.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return health(cmd.Context(), g, cmd.OutOrStdout())
		},
	}
}

func health(ctx context.Context, g *globals, out io.Writer) error {
	endpoint, _, _ := strings.Cut(g.endpoints, ",")
	endpoint = strings.TrimRight(strings.TrimSpace(endpoint), "/")
	tlsCfg, err := clientTLS(g.caFile, g.certFile, g.keyFile)
	if err != nil {
		return err
	}
	timeout := g.timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/readyz", nil)
	if err != nil {
		return usagef("--endpoints %q: %v", endpoint, err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	resp, err := hc.Do(req)
	if err != nil {
		return exitError{exitUnavailable, fmt.Errorf("%s is not ready: %w", endpoint, err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return exitError{exitUnavailable, fmt.Errorf("%s is not ready: %s %s", endpoint, resp.Status, strings.TrimSpace(string(body)))}
	}
	fmt.Fprint(out, string(body))
	return nil
}
