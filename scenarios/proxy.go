package scenarios

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// TCPProxy forwards TCP connections to one target and can reset all of
// them at once, as a failing NAT, switch or Postgres failover does to a
// pool's connections. The scenarios put it between a stack's pgx pool and
// Postgres and cut at a fault point.
//
// Why not toxiproxy: it is not in go.mod, and its server is a separate
// process with an HTTP control API, far more than the one fault needed
// here (reset every connection now). A cut is SO_LINGER 0 plus Close on
// both sides, so the pool sees ECONNRESET/EOF exactly as on a real cut.
// New connections are accepted again at once after a cut.
type TCPProxy struct {
	ln     net.Listener
	target string
	resets atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewTCPProxy listens on a free loopback port and forwards to target.
func NewTCPProxy(target string) (*TCPProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &TCPProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *TCPProxy) Addr() string { return p.ln.Addr().String() }

// Resets counts the connections reset by Cut so far.
func (p *TCPProxy) Resets() int64 { return p.resets.Load() }

func (p *TCPProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *TCPProxy) handle(down net.Conn) {
	defer p.wg.Done()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = down.Close()
		return
	}
	p.mu.Lock()
	p.conns[down] = struct{}{}
	p.mu.Unlock()
	var pipes sync.WaitGroup
	// When either direction ends, end both: a half-open pair would keep
	// the other copy blocked.
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	pipes.Go(func() { pipe(up, down) })
	pipes.Go(func() { pipe(down, up) })
	pipes.Wait()
	p.mu.Lock()
	delete(p.conns, down)
	p.mu.Unlock()
}

// Cut resets every open client connection (the upstream side follows as
// its copy ends) and returns how many it reset.
func (p *TCPProxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close sends RST, not FIN
		}
		_ = c.Close()
		delete(p.conns, c)
		n++
	}
	p.resets.Add(int64(n))
	return n
}

// Close stops accepting, resets what is open and waits for every copy.
func (p *TCPProxy) Close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
