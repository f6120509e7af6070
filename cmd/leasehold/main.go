// Command leasehold runs a leasehold node (serve) and talks to one (acquire,
// release, status, list, run). Flags travel one way: flags -> config ->
// constructors.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/client/clientotel"
)

const defaultEndpoint = "http://127.0.0.1:7420"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runMain runs the command line args, prints its error if any, and
// returns its exit status.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &globals{}
	root := newRootOf(g)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	g.flushTraces()
	reportError(stderr, g, cmd, err)
	return exitCode(err)
}

// reportError prints err (unless it only carries a status) and what to do
// about it: the failed command's help for a usage error, how to give a
// token when the node asks for one.
func reportError(w io.Writer, g *globals, cmd *cobra.Command, err error) {
	var ee exitError
	if err == nil || errors.As(err, &ee) && ee.err == nil {
		return
	}
	fmt.Fprintln(w, "leasehold:", err)
	switch {
	case exitCode(err) == exitUsage: // the command line's mistake, or a request the node finds invalid
		fmt.Fprintf(w, "Run '%s --help' for usage.\n", cmd.CommandPath())
	case leasehold.CodeOf(err) == leasehold.CodeUnauthenticated:
		if _, source, terr := g.bearerToken(); terr == nil && source != "" {
			fmt.Fprintf(w, "The node refused the token from %s (the token is not shown).\n", source)
		} else {
			fmt.Fprintf(w, "The node needs a bearer token: %s.\n", tokenHelp)
		}
	}
}

type globals struct {
	endpoints                 string
	timeout                   time.Duration
	authToken, tokenFile      string
	caFile, certFile, keyFile string
	otlpEndpoint              string

	// A client command's tracing (clitracing.go): nil without an endpoint.
	tracingDone bool
	tp          *sdktrace.TracerProvider
	span        trace.Span
}

// ctx bounds a command's calls to the cluster: they give up after
// --timeout (plus wait, for a command that queues on purpose) instead of
// retrying an unreachable cluster forever.
func (g *globals) ctx(parent context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	if g.timeout <= 0 {
		return context.WithCancel(parent)
	}
	return context.WithTimeout(parent, wait+g.timeout)
}

func newRoot() *cobra.Command { return newRootOf(&globals{}) }

func newRootOf(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "leasehold",
		Short:         "Fenced leases and coordination primitives",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	def := os.Getenv("LEASEHOLD_ENDPOINTS")
	if def == "" {
		def = defaultEndpoint
	}
	root.PersistentFlags().StringVar(&g.endpoints, "endpoints", def,
		"comma-separated node URLs, or host:port meaning http:// (https:// with --ca-file or --cert-file) (env LEASEHOLD_ENDPOINTS)")
	durationVar(root.PersistentFlags(), &g.timeout, "timeout", 10*time.Second,
		"give up when the cluster cannot be reached for this long (on top of --wait; 0: never)")
	// No default shows a token: the variables are read when a command runs.
	root.PersistentFlags().StringVar(&g.authToken, "auth-token", "",
		"bearer token (visible to ps: prefer env "+envAuthToken+" or --token-file). The first set of --auth-token, "+
			"--token-file, "+envAuthToken+" and "+envTokenFile+" is used")
	root.PersistentFlags().StringVar(&g.tokenFile, "token-file", "",
		"file whose first line is the bearer token (env "+envTokenFile+")")
	root.PersistentFlags().StringVar(&g.caFile, "ca-file", "", "CA certificate (PEM) to trust for https endpoints")
	root.PersistentFlags().StringVar(&g.certFile, "cert-file", "", "client certificate (PEM) for mTLS")
	root.PersistentFlags().StringVar(&g.keyFile, "key-file", "", "client certificate's key (PEM)")
	root.PersistentFlags().StringVar(&g.otlpEndpoint, "otlp-endpoint", "",
		"send the command's OpenTelemetry traces to this OTLP/HTTP collector URL (default: none, or OTEL_EXPORTER_OTLP_ENDPOINT if set)")
	root.AddCommand(
		newAuth(),
		newServe(g),
		newAcquire(g),
		newRenew(g),
		newRelease(g),
		newStatus(g),
		newList(g),
		newWatch(g),
		newRun(g), newWatchdog(),
		newElect(g), newElections(g),
		newBench(g), newTorture(g),
		newDoctor(g),
		newCluster(g),
		newLocks(g), newForceRelease(g), newAudit(g),
		newIdem(g),
		newQueue(g),
		newGroups(g),
		newBarrier(g),
		newKV(g), newCheckFence(g),
		newRecover(),
		newExitCodesHelp(),
		newVersion(),
		newSnapshot(g),
		newHealth(g),
	)
	root.Version = versionLine(buildVersion())
	root.SetVersionTemplate("{{.Version}}\n")
	// Made now, not when cobra runs, so that strictUsage covers them too.
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	strictHelp(root)
	strictUsage(root)
	return root
}

// session is what a client command needs: a client, and a context that
// bounds its calls by --timeout plus wait.
func (g *globals) session(cmd *cobra.Command, wait time.Duration) (*client.Client, context.Context, context.CancelFunc, error) {
	c, err := g.client()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := g.ctx(g.commandSpan(cmd.Context(), cmd), wait)
	return c, ctx, cancel, nil
}

func (g *globals) client() (*client.Client, error) {
	cfg, err := g.clientConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg)
}

// clientConfig is the client configuration the global flags describe.
func (g *globals) clientConfig() (client.Config, error) {
	eps, err := g.endpointURLs()
	if err != nil {
		return client.Config{}, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	token, _, err := g.bearerToken()
	if err != nil {
		return client.Config{}, err
	}
	tlsCfg, err := clientTLS(g.caFile, g.certFile, g.keyFile)
	if err != nil {
		return client.Config{}, err
	}
	if err := g.clientTracing(); err != nil {
		return client.Config{}, err
	}
	// A command makes a call or a few: unary calls, without opening a
	// session stream for them (bench sets its own).
	cfg := client.Config{Endpoints: eps, Logger: log, Token: token, TLS: tlsCfg, Session: client.SessionOff,
		Drift: clientDrift, DriftRatio: clientDriftRatio, Timeout: g.timeout}
	if g.timeout <= 0 {
		cfg.Timeout = -1 // --timeout 0: never give up
	}
	if g.tp != nil {
		cfg.Tracing = clientotel.New(g.tp)
	}
	return cfg, nil
}
