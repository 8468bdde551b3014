package idleconn_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"time"

	"github.com/netwheel/netwheel/idle"
	"github.com/netwheel/netwheel/idle/idleconn"
	"github.com/netwheel/netwheel/wheel"
)

// net/http with idle's timeouts: the wrapper gives every connection of the
// listener an idle timeout (and the defaults: max age, write stall), so a
// keep-alive connection on which no request comes is closed, never before
// the timeout, and ConnState, which sees the wrapper, learns why.
func ExampleWrapListener() {
	w := wheel.New()
	defer w.Stop()

	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	const timeout = 200 * time.Millisecond // short, to keep the example quick
	ln, err := idleconn.WrapListener(raw, w, idle.Config{IdleTimeout: timeout})
	if err != nil {
		panic(err)
	}
	closed := make(chan idle.Reason, 1)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprint(rw, "hello")
		}),
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				closed <- c.(*idleconn.Conn).Tracker().Reason()
			}
		},
	}
	go srv.Serve(ln)
	defer srv.Close()

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	sent := time.Now() // before the request: the connection's last byte is after it
	resp, err := client.Get("http://" + raw.Addr().String())
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("%s: %s\n", resp.Status, body)
	// The client keeps the connection for its next request; the server
	// closes it once it has been idle for the timeout.
	reason := <-closed
	fmt.Println("keep-alive connection closed:", reason, "/ not before the timeout:", time.Since(sent) >= timeout)
	// Output:
	// 200 OK: hello
	// keep-alive connection closed: idle / not before the timeout: true
}

// net/http over TLS with idle's timeouts: the wrapper goes below TLS, so
// that net/http sees a *tls.Conn (Request.TLS set, HTTP/2), and
// NewTLSListener clears each connection's handshake timeout when its
// handshake is through. The timeouts are short to keep the example quick,
// and leave room for a handshake on a busy machine (beside two spinners,
// under the race detector, one took more than 250 ms). They are equal, so
// that the silent client below is closed for its handshake, which comes
// first when both are due.
func ExampleNewTLSListener() {
	w := wheel.New()
	defer w.Stop()

	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	ln, err := idleconn.WrapListener(raw, w, idle.Config{
		HandshakeTimeout: time.Second, // from accept to the TLS handshake
		IdleTimeout:      time.Second, // no byte either way
	})
	if err != nil {
		panic(err)
	}
	cert, roots, err := selfSigned()
	if err != nil {
		panic(err)
	}
	tlsLn := idleconn.NewTLSListener(ln, &tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"h2", "http/1.1"}, // HTTP/2 when the client offers it
	})

	closed := make(chan idle.Reason, 4)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(rw, "%s, TLS: %v", r.Proto, r.TLS != nil)
		}),
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				// Under net/http's *tls.Conn is the wrapper.
				closed <- c.(*tls.Conn).NetConn().(*idleconn.Conn).Tracker().Reason()
			}
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go srv.Serve(tlsLn)
	defer srv.Close()

	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: true,
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + raw.Addr().String())
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("%s: %s\n", resp.Proto, body)
	// The client keeps the connection for the next request; the server
	// closes it once it has been idle.
	fmt.Println("keep-alive connection closed:", <-closed)

	// A client that connects and never sends its ClientHello.
	c, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	_, err = c.Read(make([]byte, 1))
	fmt.Println("silent client:", err, "/", <-closed)
	// Output:
	// HTTP/2.0: HTTP/2.0, TLS: true
	// keep-alive connection closed: idle
	// silent client: EOF / handshake
}

// selfSigned returns a certificate for 127.0.0.1, signed by itself, and a
// pool with it as the only root.
func selfSigned() (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "idle test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, roots, nil
}
