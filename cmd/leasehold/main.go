// Command leasehold runs a leasehold node (serve) and talks to one (acquire,
// release, status, list, run). Flags travel one way: flags -> config ->
// constructors.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/client"
)

const defaultEndpoint = "http://127.0.0.1:7420"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	g := &globals{}
	err := newRootOf(g).ExecuteContext(ctx)
	stop()
	g.flushTraces()
	var ee exitError
	if err != nil && (!errors.As(err, &ee) || ee.err != nil) {
		fmt.Fprintln(os.Stderr, "leasehold:", err)
		if errors.As(err, new(usageError)) {
			fmt.Fprintln(os.Stderr, "Run 'leasehold help' or 'leasehold COMMAND --help' for usage.")
		}
	}
	os.Exit(exitCode(err))
}

type globals struct {
	endpoints                 string
	timeout                   time.Duration
	tokenFile                 string
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
		"comma-separated node URLs (env LEASEHOLD_ENDPOINTS)")
	durationVar(root.PersistentFlags(), &g.timeout, "timeout", 10*time.Second,
		"give up when the cluster cannot be reached for this long (on top of --wait; 0: never)")
	root.PersistentFlags().StringVar(&g.tokenFile, "token-file", os.Getenv("LEASEHOLD_TOKEN_FILE"),
		"file holding the bearer token (env LEASEHOLD_TOKEN_FILE)")
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
		newKV(g), newCheckFence(g),
		newRecover(),
		newExitCodesHelp(),
		newVersion(),
		newSnapshot(g),
		newHealth(g),
	)
	root.Version = versionLine(buildVersion())
	root.SetVersionTemplate("{{.Version}}\n")
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
	var eps []string
	for _, e := range strings.Split(g.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	token, err := readToken(g.tokenFile)
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
	cfg := client.Config{Endpoints: eps, Logger: log, Token: token, TLS: tlsCfg, Session: client.SessionOff, Timeout: g.timeout}
	if g.timeout <= 0 {
		cfg.Timeout = -1 // --timeout 0: never give up
	}
	if g.tp != nil {
		cfg.TracerProvider = g.tp
	}
	return cfg, nil
}
