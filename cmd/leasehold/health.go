package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// newHealth is `leasehold health`: a probe for supervisors (Docker's
// HEALTHCHECK, scripts) that needs nothing but the binary itself.
func newHealth(g *globals) *cobra.Command {
	var o *output
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 if the node at --endpoints is ready (has a leader and serves), 7 if not",
		Long: "Asks the first node of --endpoints for /readyz: ready means it has a leader\n" +
			"and applies the log. Exits 0 and prints the node's answer if it is ready, 7\n" +
			"(unavailable) if it is not or does not answer within --timeout. With --json it\n" +
			"prints one object either way (ready true or false, and why).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := health(cmd.Context(), g)
			if err != nil && !o.JSON() {
				return err
			}
			if perr := o.print(cmd.OutOrStdout(), h, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, h.Message)
				return err
			}); perr != nil {
				return perr
			}
			return err
		},
	}
	o = addOutput(cmd)
	return cmd
}

// health asks the first endpoint's /readyz; err is an exitError (7 when
// the node is not ready or does not answer, 2 for a bad endpoint).
func health(ctx context.Context, g *globals) (cliout.Health, error) {
	eps, err := g.endpointURLs()
	if err != nil {
		return cliout.Health{Endpoint: g.endpoints, Message: err.Error()}, err
	}
	endpoint := eps[0]
	h := cliout.Health{Endpoint: endpoint}
	tlsCfg, err := clientTLS(g.caFile, g.certFile, g.keyFile)
	if err != nil {
		h.Message = err.Error()
		return h, err
	}
	timeout := g.timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/readyz", nil)
	if err != nil {
		h.Message = err.Error()
		return h, usagef("--endpoints %q: %v", endpoint, err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	resp, err := hc.Do(req)
	if err != nil {
		h.Message = err.Error()
		return h, exitError{exitUnavailable, fmt.Errorf("%s is not ready: %w", endpoint, err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	h.Message = strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return h, exitError{exitUnavailable, fmt.Errorf("%s is not ready: %s %s", endpoint, resp.Status, h.Message)}
	}
	h.Ready = true
	// "ready: leader ID at ADDR" (server.ready)
	if rest, ok := strings.CutPrefix(h.Message, "ready: leader "); ok {
		h.LeaderNodeID, h.LeaderRaftAddr, _ = strings.Cut(rest, " at ")
	}
	return h, nil
}
