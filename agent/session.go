package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/rendermac/rendermac/protocol"
)

const (
	// handshakeTimeout bounds dialing and the hello/welcome exchange.
	handshakeTimeout = 10 * time.Second
	// writeTimeout bounds one frame write; a peer that stops reading for
	// that long is treated as gone and the session is re-established.
	writeTimeout = 10 * time.Second
	// minHeartbeat keeps a misconfigured welcome from spinning the writer.
	minHeartbeat = 10 * time.Millisecond
)

// session is one WebSocket connection after a successful welcome.
type session struct {
	conn    *websocket.Conn
	welcome protocol.Welcome
}

// runSession dials, greets, and serves one connection until it ends. It
// returns how long the session lasted after the welcome (0 if it never got
// there) and why it ended.
func (a *Agent) runSession(ctx context.Context) (time.Duration, error) {
	conn, err := a.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.CloseNow()
	welcome, free, err := a.handshake(ctx, conn)
	if err != nil {
		return 0, err
	}
	s := &session{conn: conn, welcome: welcome}
	if !a.attach(s, free) {
		_ = conn.Close(websocket.StatusNormalClosure, "agent shutting down")
		return 0, nil
	}
	a.log.Info("session open", "url", a.wsURLs[a.urlIdx], "device_id", welcome.DeviceID, "lease_ttl_ms", welcome.LeaseTTLMs,
		"heartbeat", heartbeatInterval(welcome))
	start := a.cfg.Clock.Now()
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		// A failed write means the connection is gone: end the read too.
		defer cancel()
		a.writeLoop(sctx, s)
	})
	wg.Go(func() { a.heartbeatLoop(sctx, s) })
	wg.Go(func() { a.pingLoop(sctx, s) })
	err = a.readLoop(sctx, s)
	a.detach(s)
	cancel()
	wg.Wait()
	return a.cfg.Clock.Now().Sub(start), err
}

// dial opens the WebSocket. The device token goes in the handshake header
// only; a 401 or 403 is fatal, anything else is retried.
func (a *Agent) dial(ctx context.Context) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	hdr := http.Header{"Authorization": {"Bearer " + a.cfg.DeviceToken}}
	conn, resp, err := websocket.Dial(dctx, a.wsURLs[a.urlIdx], &websocket.DialOptions{HTTPClient: a.cfg.HTTPClient, HTTPHeader: hdr})
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			return nil, &fatalError{fmt.Errorf("gateway refused the device token (revoked? pair again): %w", readAPIError(resp))}
		}
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, fmt.Errorf("dial gateway: %w", readAPIError(resp))
		}
		if ce := certFailure(a.urlHost(), err); ce != nil {
			return nil, ce
		}
		return nil, fmt.Errorf("dial gateway: %w", err)
	}
	conn.SetReadLimit(protocol.ReadLimitBytes)
	return conn, nil
}

// urlHost is the host of the session URL being dialled, for the log.
func (a *Agent) urlHost() string {
	if u, err := url.Parse(a.wsURLs[a.urlIdx]); err == nil {
		return u.Host
	}
	return a.wsURLs[a.urlIdx]
}

// handshake sends hello and expects welcome.
func (a *Agent) handshake(ctx context.Context, conn *websocket.Conn) (protocol.Welcome, int, error) {
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	hello, free := a.hello()
	if err := conn.Write(hctx, websocket.MessageText, protocol.Encode(hello)); err != nil {
		return protocol.Welcome{}, 0, fmt.Errorf("send hello: %w", err)
	}
	_, data, err := conn.Read(hctx)
	if err != nil {
		return protocol.Welcome{}, 0, fmt.Errorf("await welcome: %w", err)
	}
	msg, err := protocol.DecodeGatewayFrame(data)
	if err != nil {
		return protocol.Welcome{}, 0, fmt.Errorf("await welcome: %w", err)
	}
	switch m := msg.(type) {
	case *protocol.Welcome:
		return *m, free, nil
	case *protocol.ErrorMessage:
		return protocol.Welcome{}, 0, fmt.Errorf("gateway refused hello: %s: %s", m.Code, m.Message)
	default:
		return protocol.Welcome{}, 0, fmt.Errorf("await welcome: got %T first", msg)
	}
}

// readLoop decodes gateway frames until the connection ends. A frame that
// does not decode is logged and skipped: the gateway is the authority, and
// one bad frame is no reason to drop the leases this session carries.
func (a *Agent) readLoop(ctx context.Context, s *session) error {
	for {
		typ, data, err := s.conn.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				return errors.New("gateway closed the session normally")
			}
			return fmt.Errorf("read: %w", err)
		}
		if typ != websocket.MessageText {
			a.log.Warn("ignoring non-text gateway frame")
			continue
		}
		msg, err := protocol.DecodeGatewayFrame(data)
		if err != nil {
			a.log.Warn("ignoring undecodable gateway frame", "err", err)
			continue
		}
		a.dispatch(msg)
	}
}

// writeLoop sends whatever is due each time something changes.
func (a *Agent) writeLoop(ctx context.Context, s *session) {
	for {
		frames, ok := a.collect(s)
		if !ok {
			return
		}
		for _, f := range frames {
			wctx, cancel := context.WithTimeout(ctx, writeTimeout)
			err := s.conn.Write(wctx, websocket.MessageText, protocol.Encode(f))
			cancel()
			if err != nil {
				// What was collected is re-marked when the next session attaches.
				a.log.Warn("write to gateway failed", append(frameAttrs(f), "err", err)...)
				return
			}
			a.log.Debug("sent", frameAttrs(f)...)
		}
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		}
	}
}

// heartbeatLoop asks for a progress frame per leased attempt every interval.
func (a *Agent) heartbeatLoop(ctx context.Context, s *session) {
	interval := heartbeatInterval(s.welcome)
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.cfg.Clock.After(interval):
		}
		a.heartbeat(s)
	}
}

// heartbeatInterval is min(heartbeat_ms, lease_ttl_ms/3): three chances to
// renew within one lease, whatever the gateway's heartbeat suggestion.
func heartbeatInterval(w protocol.Welcome) time.Duration {
	d := min(time.Duration(w.HeartbeatMs), time.Duration(w.LeaseTTLMs)/3) * time.Millisecond
	return max(d, minHeartbeat)
}

// frameAttrs describes a frame for logs without its commit token.
func frameAttrs(f any) []any {
	switch m := f.(type) {
	case *protocol.Progress:
		return []any{"type", m.Type, "job_id", m.JobID, "attempt_id", m.AttemptID, "phase", m.Phase}
	case *protocol.Commit:
		return []any{"type", m.Type, "job_id", m.JobID, "attempt_id", m.AttemptID, "bytes", m.Output.Bytes}
	case *protocol.Fail:
		return []any{"type", m.Type, "job_id", m.JobID, "attempt_id", m.AttemptID, "failure_code", m.FailureCode}
	case *protocol.Slots:
		return []any{"type", m.Type, "slots_free", m.SlotsFree}
	}
	return []any{slog.String("type", fmt.Sprintf("%T", f))}
}
