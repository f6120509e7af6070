package netfault

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Dialer opens a connection, as net.Dialer.DialContext does.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// Direction is one way through a proxied connection.
type Direction int

const (
	Up   Direction = iota // from the side that opened the connection to the target
	Down                  // from the target back
)

// dialTimeout bounds reaching the target; a target that does not answer
// is a dead process here, and its opener sees the connection reset.
const dialTimeout = 10 * time.Second

// Proxy forwards every connection it accepts to one target, each
// direction through its own Faults. It is safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	dial   Dialer

	mu      sync.Mutex
	faults  [2]Faults
	changed chan struct{} // closed and replaced when faults change
	rnd     *rand.Rand
	pipes   map[*pipe]struct{}
	ctx     context.Context // canceled by Close
	stop    context.CancelFunc
	closed  bool
	wg      sync.WaitGroup
}

// NewProxy forwards the connections ln accepts to target, opened with
// dial (a plain net.Dialer if nil); seed makes its jitter and losses
// repeatable. It serves until Close, which closes ln.
func NewProxy(ln net.Listener, target string, dial Dialer, seed uint64) *Proxy {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	p := &Proxy{ln: ln, target: target, dial: dial, changed: make(chan struct{}),
		rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), pipes: map[*pipe]struct{}{}}
	p.ctx, p.stop = context.WithCancel(context.Background())
	p.wg.Add(1)
	go p.accept()
	return p
}

// Addr is where the proxy listens.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is where it forwards to.
func (p *Proxy) Target() string { return p.target }

// Set changes the faults of both directions, for open connections too.
func (p *Proxy) Set(up, down Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = [2]Faults{up, down}
	close(p.changed)
	p.changed = make(chan struct{})
}

// Faults are the faults of both directions now.
func (p *Proxy) Faults() (up, down Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults[Up], p.faults[Down]
}

// Conns is the number of connections open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pipes)
}

// Close stops accepting, resets every open connection and waits until
// every goroutine of the proxy has returned. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.stop()
	err := p.ln.Close()
	pipes := make([]*pipe, 0, len(p.pipes))
	for c := range p.pipes {
		pipes = append(pipes, c)
	}
	p.mu.Unlock()
	for _, c := range pipes {
		c.abort()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. too many open files: don't spin
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

// serve connects c to the target once c's opener can reach it, and
// pumps both directions until both end or one fails.
func (p *Proxy) serve(c net.Conn) {
	if !p.flowing(Up, p.ctx.Done()) {
		c.Close()
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
	s, err := p.dial(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		reset(c)
		return
	}
	pp := &pipe{opener: c, target: s, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pp.abort()
		return
	}
	p.pipes[pp] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pump(Up, c, s, pp) }()
	go func() { defer wg.Done(); p.pump(Down, s, c, pp) }()
	wg.Wait()
	pp.close()
	p.mu.Lock()
	delete(p.pipes, pp)
	p.mu.Unlock()
}

// flowing waits until dir is not held; false if done closes first.
func (p *Proxy) flowing(dir Direction, done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		held, changed := p.faults[dir].Hold, p.changed
		p.mu.Unlock()
		if !held {
			return true
		}
		select {
		case <-changed:
		case <-done:
			return false
		}
	}
}

// due is when a chunk read now in direction dir is delivered: after its
// lag, and not before the chunk ahead of it (due at prev).
func (p *Proxy) due(dir Direction, prev time.Time) time.Time {
	p.mu.Lock()
	lag := p.faults[dir].lag(p.rnd)
	p.mu.Unlock()
	at := time.Now().Add(lag)
	if at.Before(prev) {
		return prev
	}
	return at
}

// chunk is one read from a connection: its bytes, or how the read ended.
type chunk struct {
	data []byte
	err  error
	due  time.Time
}

// pending is how many chunks one direction reads ahead of delivery: with
// 32 KiB reads, at most 2 MiB held per direction before the sender feels
// it.
const pending = 64

// pump carries one direction: a reader stamps each chunk with when it is
// due, and the delivery waits for that time and for the direction to flow.
// EOF is passed on as a half-close; any other end resets both sides.
func (p *Proxy) pump(dir Direction, src, dst net.Conn, pp *pipe) {
	chunks := make(chan chunk, pending)
	go func() {
		defer close(chunks)
		buf := make([]byte, 32<<10)
		var prev time.Time
		for {
			n, err := src.Read(buf)
			if n > 0 {
				prev = p.due(dir, prev)
				select {
				case chunks <- chunk{data: append([]byte(nil), buf[:n]...), due: prev}:
				case <-pp.done:
					return
				}
			}
			if err != nil {
				select {
				case chunks <- chunk{err: err, due: p.due(dir, prev)}:
				case <-pp.done:
				}
				return
			}
		}
	}()
	for ch := range chunks {
		if !sleepUntil(ch.due, pp.done) || !p.flowing(dir, pp.done) {
			continue // aborted: drain until the reader sees it
		}
		switch {
		case ch.err == nil:
			if _, err := dst.Write(ch.data); err != nil {
				pp.abort()
			}
		case errors.Is(ch.err, io.EOF):
			closeWrite(dst)
		default:
			pp.abort()
		}
	}
}

// pipe is one proxied connection: the opener's side and the target's.
type pipe struct {
	opener, target net.Conn
	done           chan struct{}
	once           sync.Once
}

// abort resets both sides (a read error on one is passed on as a reset).
func (c *pipe) abort() {
	c.once.Do(func() {
		close(c.done)
		reset(c.opener)
		reset(c.target)
	})
}

// close ends both sides after both directions ended by themselves.
func (c *pipe) close() {
	c.once.Do(func() {
		close(c.done)
		c.opener.Close()
		c.target.Close()
	})
}

// reset closes c with an RST rather than a FIN, as a dead peer would.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// sleepUntil waits until t; false if done closes first.
func sleepUntil(t time.Time, done <-chan struct{}) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-done:
		return false
	}
}
