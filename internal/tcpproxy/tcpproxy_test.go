package tcpproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer echoes lines and reports on ended when a connection ends.
func echoServer(t *testing.T) (addr string, ended chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	ended = make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(c, c)
				_ = c.Close()
				ended <- struct{}{}
			}()
		}
	}()
	return ln.Addr().String(), ended
}

func roundTrip(c net.Conn, timeout time.Duration) (string, error) {
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	return bufio.NewReader(c).ReadString('\n')
}

func TestBlackHoleSilencesWithoutClosingAndHealLetsNewConnectionsThrough(t *testing.T) {
	addr, ended := echoServer(t)
	p, err := New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := roundTrip(c, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("before the outage: %q, %v", got, err)
	}
	if n := p.BlackHole(); n != 1 {
		t.Fatalf("BlackHole silenced %d connections, want 1", n)
	}
	// Writes still succeed (nothing is reset), but nothing comes back.
	_, err = roundTrip(c, 300*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read through a black hole: %v, want a timeout", err)
	}
	// The client's FIN does not reach the server.
	_ = c.Close()
	select {
	case <-ended:
		t.Fatal("the server saw the connection end through a black hole")
	case <-time.After(300 * time.Millisecond):
	}
	// During the outage a new connection is reset at once.
	if d, err := net.Dial("tcp", p.Addr()); err == nil {
		if _, err := roundTrip(d, 2*time.Second); err == nil {
			t.Fatal("a new connection was forwarded during the outage")
		}
		_ = d.Close()
	}
	p.Heal()
	d, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got, err := roundTrip(d, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after Heal: %q, %v", got, err)
	}
	if p.BlackHoled() != 1 || p.Forwarded() != 2 {
		t.Fatalf("black-holed %d, forwarded %d; want 1 and 2", p.BlackHoled(), p.Forwarded())
	}
}

func TestCutResetsBothEnds(t *testing.T) {
	addr, ended := echoServer(t)
	p, err := New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := roundTrip(c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := p.Cut(); n != 1 {
		t.Fatalf("Cut reset %d, want 1", n)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not see the cut")
	}
	if _, err := roundTrip(c, 2*time.Second); err == nil {
		t.Fatal("the client's connection survived the cut")
	}
}
