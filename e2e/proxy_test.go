package e2e

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// tcpProxy forwards TCP connections to a target and can reset all of them
// at once: both sides see a connection reset (SO_LINGER 0), as when a NAT
// or Wi-Fi drop kills a long-lived WebSocket. New connections are still
// accepted after a cut.
type tcpProxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) serve() {
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

func (p *tcpProxy) handle(down net.Conn) {
	defer p.wg.Done()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = down.Close()
		return
	}
	p.mu.Lock()
	p.conns[down], p.conns[up] = struct{}{}, struct{}{}
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
	delete(p.conns, up)
	p.mu.Unlock()
}

// cut resets every open connection in both directions and returns how
// many sockets it reset.
func (p *tcpProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close sends RST, not FIN
		}
		_ = c.Close()
		n++
	}
	return n
}

func (p *tcpProxy) close() {
	_ = p.ln.Close()
	p.cut()
	p.wg.Wait()
}
