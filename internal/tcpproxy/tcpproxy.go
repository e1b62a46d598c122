// Package tcpproxy is a TCP forwarder that can reset every connection
// through it at once, or black-hole them, for fault tests: between a pgx
// pool and Postgres, or between an agent and the gateway.
package tcpproxy

import (
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
//
// BlackHole is the other fault, a Wi-Fi loss: every open connection stops
// carrying bytes in either direction without being closed (no RST, no FIN
// reaches either end, whatever they do), and until Heal new connections
// are reset at once, as a connect fails with no route. Heal lets new
// connections through again; the black-holed ones stay dead, as a TCP
// connection does after a Wi-Fi change, until their ends give up on them.
type Proxy struct {
	ln        net.Listener
	target    string
	resets    atomic.Int64
	accepted  atomic.Int64
	holed     atomic.Int64
	unreached atomic.Int64
	outage    atomic.Bool

	mu sync.Mutex
	// conns maps each client-side socket to its pair.
	conns map[net.Conn]*pair
	wg    sync.WaitGroup
}

// pair is one forwarded connection; dead says it is black-holed.
type pair struct {
	down, up net.Conn
	dead     atomic.Bool
}

// New listens on a free loopback port and forwards to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]*pair{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Resets counts the connections reset by Cut so far.
func (p *Proxy) Resets() int64 { return p.resets.Load() }

// Accepted counts the client connections accepted so far (forwarded, or
// reset during a black-hole outage).
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Forwarded counts the client connections forwarded to the target so far.
func (p *Proxy) Forwarded() int64 { return p.accepted.Load() - p.unreached.Load() }

// BlackHoled counts the connections black-holed by BlackHole so far.
func (p *Proxy) BlackHoled() int64 { return p.holed.Load() }

// BlackHole silences every open connection for good and resets new ones
// until Heal; it returns how many connections it silenced.
func (p *Proxy) BlackHole() int {
	p.outage.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, pr := range p.conns {
		if !pr.dead.Swap(true) {
			n++
		}
	}
	p.holed.Add(int64(n))
	return n
}

// Heal ends the outage: new connections are forwarded again.
func (p *Proxy) Heal() { p.outage.Store(false) }

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
	if p.outage.Load() {
		p.unreached.Add(1)
		reset(down)
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = down.Close()
		return
	}
	pr := &pair{down: down, up: up}
	p.mu.Lock()
	p.conns[down] = pr
	p.mu.Unlock()
	var pipes sync.WaitGroup
	pipes.Go(func() { pr.pipe(up, down) })
	pipes.Go(func() { pr.pipe(down, up) })
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
	for down, pr := range p.conns {
		reset(pr.down)
		reset(pr.up)
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

// reset closes c with an RST, not a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// pipe copies src to dst until src ends. Alive, the end of either direction
// ends both (a half-open pair would keep the other copy blocked). Black-holed,
// what arrives is read and dropped, and an end is not passed on: src is
// closed but dst stays open until its own end closes it or the proxy closes.
func (pr *pair) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !pr.dead.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = src.Close()
	if !pr.dead.Load() {
		_ = dst.Close()
	}
}
