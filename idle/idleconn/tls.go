package idleconn

import (
	"crypto/tls"
	"net"
)

// NewTLSListener returns a listener that serves TLS with config over the
// connections ln accepts, as tls.NewListener does, and marks each
// connection's handshake done (Tracker.HandshakeDone) during the handshake.
// ln is a *Listener from WrapListener, or a listener whose connections
// lead to a *Conn through NetConn methods; on other connections nothing is
// marked. Serve it with http.Server.Serve, not ServeTLS, which would add a
// TLS layer of its own; for HTTP/2, config.NextProtos must list "h2" (and
// "http/1.1"). Accept returns a *tls.Conn, so net/http runs the handshake
// under its own timeouts, sets Request.TLS and serves HTTP/2.
//
// The mark is made from tls.Config.VerifyConnection, which crypto/tls calls
// on every successful server handshake, full or resumed, once the client is
// verified: only the client's last flight (its Finished message; in TLS
// 1.2 what follows its first message of that flight) is then still to
// come. The HandshakeTimeout thus bounds everything up to that point, and
// the IdleTimeout or ReadSilenceTimeout (or net/http's ReadHeaderTimeout)
// bound the rest. A server that runs the handshake itself can instead call
// HandshakeDone when tls.Conn.Handshake returns.
//
// To reach each connection's Tracker, config is used through
// GetConfigForClient: each handshake gets a shallow copy of config (or of
// what config's own GetConfigForClient returns, which is called first)
// whose VerifyConnection calls config's and then marks the handshake. The
// cost is one tls.Config copy per handshake. Session resumption keeps
// working: keys set with config.SetSessionTicketKeys, even later, are read
// at each handshake, and automatic ones are shared by all the listener's
// connections. Other fields of config must not be modified after this
// call. NewTLSListener panics if config is nil.
func NewTLSListener(ln net.Listener, config *tls.Config) net.Listener {
	if config == nil {
		panic("idleconn: NewTLSListener with nil config")
	}
	outer := config.Clone()
	outer.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		return configForClient(config, hello)
	}
	return &tlsListener{Listener: ln, config: outer}
}

// tlsListener serves TLS on the connections of a wrapped listener.
type tlsListener struct {
	// Written by NewTLSListener and only read afterwards.
	net.Listener
	config *tls.Config
}

// Accept waits for the next connection and returns it as a *tls.Conn.
func (l *tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(c, l.config), nil
}

// configForClient returns the configuration for one handshake: base (or
// what its GetConfigForClient returns) with a VerifyConnection that also
// marks the handshake of the *Conn under hello.Conn.
func configForClient(base *tls.Config, hello *tls.ClientHelloInfo) (*tls.Config, error) {
	cfg := base
	if base.GetConfigForClient != nil {
		c, err := base.GetConfigForClient(hello)
		if err != nil {
			return nil, err
		}
		if c != nil {
			cfg = c
		}
	}
	ic := findConn(hello.Conn)
	if ic == nil {
		return cfg, nil
	}
	pc := cfg.Clone()
	pc.GetConfigForClient = nil // not consulted on a returned config
	verify := cfg.VerifyConnection
	pc.VerifyConnection = func(cs tls.ConnectionState) error {
		if verify != nil {
			if err := verify(cs); err != nil {
				return err
			}
		}
		ic.t.HandshakeDone()
		return nil
	}
	return pc, nil
}

// findConn returns the *Conn that c is or wraps (through NetConn), or nil.
func findConn(c net.Conn) *Conn {
	for range 8 { // a bound, against a NetConn that returns its receiver
		switch v := c.(type) {
		case *Conn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}
