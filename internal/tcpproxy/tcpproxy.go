// Package tcpproxy is a TCP forwarder that can reset every connection
// through it at once, for fault tests: between a pgx pool and Postgres, or
// between an agent and the gateway.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards TCP connections to one target and can reset all of them
// at once, as a failing NAT, switch, Wi-Fi drop or Postgres failover does.
// Both sockets of a connection are reset, so each side sees ECONNRESET.
//
// Why not toxiproxy: it is not in go.mod, and its server is a separate
// process with an HTTP control API, far more than the one fault needed
// here (reset every connection now). A cut is SO_LINGER 0 plus Close on
// both sockets, so each side sees ECONNRESET exactly as on a real cut.
// New connections are accepted again at once after a cut.
type Proxy struct {
	ln       net.Listener
	target   string
	resets   atomic.Int64
	accepted atomic.Int64

	mu sync.Mutex
	// conns maps each client-side socket to its upstream socket.
	conns map[net.Conn]net.Conn
	wg    sync.WaitGroup
}

// New listens on a free loopback port and forwards to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]net.Conn{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Resets counts the connections reset by Cut so far.
func (p *Proxy) Resets() int64 { return p.resets.Load() }

// Accepted counts the client connections accepted so far.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *Proxy) handle(down net.Conn) {
	defer p.wg.Done()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = down.Close()
		return
	}
	p.mu.Lock()
	p.conns[down] = up
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

// Cut resets every open connection, both its sockets, and returns how
// many connections it reset.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for down, up := range p.conns {
		for _, c := range []net.Conn{down, up} {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close sends RST, not FIN
			}
			_ = c.Close()
		}
		delete(p.conns, down)
		n++
	}
	p.resets.Add(int64(n))
	return n
}

// Close stops accepting, resets what is open and waits for every copy.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
