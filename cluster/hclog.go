package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends hashicorp/raft's logs to slog.
type hclogAdapter struct {
	l    *slog.Logger
	name string
	args []any
}

func newHclog(l *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{l: l, name: name}
}

var levels = map[hclog.Level]slog.Level{
	hclog.Trace: slog.LevelDebug - 4, hclog.Debug: slog.LevelDebug, hclog.Info: slog.LevelInfo,
	hclog.Warn: slog.LevelWarn, hclog.Error: slog.LevelError,
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	lv, ok := levels[level]
	if !ok {
		lv = slog.LevelInfo
	}
	if !a.l.Enabled(context.Background(), lv) {
		return
	}
	all := append([]any{"component", a.name}, a.args...)
	for _, v := range args {
		// hclog.Fmt defers formatting to the logger.
		if f, ok := v.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				v = fmt.Sprintf(format, f[1:]...)
			}
		}
		all = append(all, v)
	}
	a.l.Log(context.Background(), lv, msg, all...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) IsTrace() bool { return a.l.Enabled(context.Background(), slog.LevelDebug-4) }
func (a *hclogAdapter) IsDebug() bool { return a.l.Enabled(context.Background(), slog.LevelDebug) }
func (a *hclogAdapter) IsInfo() bool  { return a.l.Enabled(context.Background(), slog.LevelInfo) }
func (a *hclogAdapter) IsWarn() bool  { return a.l.Enabled(context.Background(), slog.LevelWarn) }
func (a *hclogAdapter) IsError() bool { return a.l.Enabled(context.Background(), slog.LevelError) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.args }
func (a *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{l: a.l, name: a.name, args: append(append([]any{}, a.args...), args...)}
}
func (a *hclogAdapter) Name() string { return a.name }
func (a *hclogAdapter) Named(name string) hclog.Logger {
	return &hclogAdapter{l: a.l, name: a.name + "." + name, args: a.args}
}
func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{l: a.l, name: name, args: a.args}
}
func (a *hclogAdapter) SetLevel(hclog.Level) {}
func (a *hclogAdapter) GetLevel() hclog.Level {
	switch {
	case a.IsDebug():
		return hclog.Debug
	case a.IsInfo():
		return hclog.Info
	case a.IsWarn():
		return hclog.Warn
	}
	return hclog.Error
}
func (a *hclogAdapter) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(a.l.Handler(), slog.LevelInfo)
}
func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return a.StandardLogger(nil).Writer()
}
