// Package deviceclient is an agent-side protocol client for tests of the
// device gateway: it speaks SPEC section 5 over a real WebSocket, decodes
// every gateway frame strictly, and exposes the close status, so scenario
// tests can script an agent frame by frame. It does not import the gateway,
// so the gateway's own tests can use it.
package deviceclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/rendermac/rendermac/protocol"
)

// Timeout bounds every wait of the testing helpers, so a gateway that never
// answers fails the test instead of hanging it.
var Timeout = 10 * time.Second

// Client is one agent session. A background reader keeps the connection
// served (pings are answered even while the test does not look) and queues
// frames for Next.
type Client struct {
	conn   *websocket.Conn
	frames chan []byte
	done   chan struct{}
	err    error // why the reader stopped; read after done is closed

	closeOnce sync.Once
}

// WSURL turns an http(s) base URL and a path into a ws(s) URL.
func WSURL(baseURL, path string) string {
	return "ws" + strings.TrimPrefix(baseURL, "http") + path
}

// Dial opens a session at url with the device token (none when token is
// ""). A refused handshake returns the HTTP response with its body unread.
func Dial(ctx context.Context, url, token string) (*Client, *http.Response, error) {
	return dial(ctx, url, token, nil)
}

// DialFrom is Dial from the local address ip (every 127.0.0.0/8 address
// reaches a loopback server on Linux), so that per-IP limits see another
// client.
func DialFrom(ctx context.Context, url, token, ip string) (*Client, *http.Response, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	defer tr.CloseIdleConnections() // a hijacked connection is not idle
	return dial(ctx, url, token, &http.Client{Transport: tr})
}

func dial(ctx context.Context, url, token string, hc *http.Client) (*Client, *http.Response, error) {
	opts := &websocket.DialOptions{HTTPClient: hc}
	if token != "" {
		opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + token}}
	}
	conn, resp, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		return nil, resp, err
	}
	// Frames from the gateway obey the same limit as frames to it.
	conn.SetReadLimit(protocol.ReadLimitBytes)
	c := &Client{conn: conn, frames: make(chan []byte, 256), done: make(chan struct{})}
	go c.read()
	return c, resp, nil
}

func (c *Client) read() {
	defer close(c.done)
	defer close(c.frames)
	for {
		_, data, err := c.conn.Read(context.Background())
		if err != nil {
			c.err = err
			return
		}
		c.frames <- data
	}
}

// Send writes msg as one JSON text frame.
func (c *Client) Send(ctx context.Context, msg any) error {
	return c.SendRaw(ctx, protocol.Encode(msg))
}

// SendRaw writes data as one text frame, as it is.
func (c *Client) SendRaw(ctx context.Context, data []byte) error {
	return c.conn.Write(ctx, websocket.MessageText, data)
}

// SendBinary writes data as one binary frame.
func (c *Client) SendBinary(ctx context.Context, data []byte) error {
	return c.conn.Write(ctx, websocket.MessageBinary, data)
}

// ErrClosed is returned by Next once the session has ended; CloseStatus
// says how.
var ErrClosed = errors.New("deviceclient: session closed")

// Next returns the next gateway frame, strictly decoded: a pointer to one of
// the protocol's gateway messages. A frame that does not decode is an error,
// because the gateway must never send one.
func (c *Client) Next(ctx context.Context) (any, error) {
	select {
	case data, ok := <-c.frames:
		if !ok {
			return nil, fmt.Errorf("%w: %v", ErrClosed, c.err)
		}
		msg, err := protocol.DecodeGatewayFrame(data)
		if err != nil {
			return nil, fmt.Errorf("gateway sent an invalid frame %s: %w", data, err)
		}
		return msg, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a gateway frame: %w", ctx.Err())
	}
}

// Wait blocks until the session ends and returns its close status (-1 when
// it ended without a close frame). Frames not yet read are discarded.
func (c *Client) Wait(ctx context.Context) (websocket.StatusCode, error) {
	for {
		select {
		case _, ok := <-c.frames:
			if !ok {
				return websocket.CloseStatus(c.err), nil
			}
		case <-ctx.Done():
			return -1, fmt.Errorf("waiting for the session to end: %w", ctx.Err())
		}
	}
}

// Closed reports, without waiting, whether the session has ended, and why.
func (c *Client) Closed() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}

// Close ends the session with a normal closure and waits for the reader.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		_ = c.conn.Close(websocket.StatusNormalClosure, "test done")
		<-c.done
	})
}

// Drop cuts the connection without a close handshake, like a crashed agent.
func (c *Client) Drop() {
	c.closeOnce.Do(func() {
		_ = c.conn.CloseNow()
		<-c.done
	})
}

// Hello sends hello and returns the welcome.
func (c *Client) Hello(ctx context.Context, services []string, slotsTotal, slotsFree int) (*protocol.Welcome, error) {
	err := c.Send(ctx, &protocol.Hello{Type: protocol.TypeHello, AgentVersion: "deviceclient", Services: services,
		SlotsTotal: slotsTotal, SlotsFree: slotsFree})
	if err != nil {
		return nil, fmt.Errorf("send hello: %w", err)
	}
	msg, err := c.Next(ctx)
	if err != nil {
		return nil, err
	}
	w, ok := msg.(*protocol.Welcome)
	if !ok {
		return nil, fmt.Errorf("expected welcome, got %T %+v", msg, msg)
	}
	return w, nil
}
