package server

import (
	"context"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/api"
)

// requestCounter is the outermost interceptor: it counts the calls this
// node answered, forwarded ones by the answer the leader gave, labelled
// by the procedure table: a procedure's short name ("Leases.Acquire"), so
// the label values are the table's rows and nothing a caller chooses, and
// the answer's Connect code ("ok").
type requestCounter struct{ vec *prometheus.CounterVec }

func newRequestCounter(reg prometheus.Registerer) requestCounter {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasehold_requests_total",
		Help: "Calls answered by this node (a forwarded call counts on the follower and on the leader), by procedure and Connect code."},
		[]string{"procedure", "code"})
	reg.MustRegister(vec)
	for _, row := range api.Procedures() {
		vec.WithLabelValues(row.Short(), "ok") // every procedure's series, from the start
	}
	return requestCounter{vec}
}

func (c requestCounter) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		c.count(req.Spec().Procedure, err)
		return res, err
	}
}

func (c requestCounter) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		err := next(ctx, conn)
		c.count(conn.Spec().Procedure, err)
		return err
	}
}

func (requestCounter) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// count counts one call of procedure answered with err.
func (c requestCounter) count(procedure string, err error) {
	name := "unknown"
	if row := api.Lookup(procedure); row != nil {
		name = row.Short()
	}
	code := "ok"
	if err != nil {
		code = connect.CodeOf(api.ToConnect(err)).String()
	}
	c.vec.WithLabelValues(name, code).Inc()
}
