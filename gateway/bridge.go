package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
)

// The bridge reaches a runtime child in a sandbox without network. The
// child's network namespace holds nothing but its own loopback, so no host
// listener is reachable from it; the endpoint's unix socket is bound into
// the sandbox instead, and the sandbox's program is the desk binary itself
// in bridge mode:
//
//	desk __desk-gateway-bridge --listen 127.0.0.1:PORT --socket /run/desk-gateway/gateway.sock -- ARGV…
//
// It listens on the child's loopback, forwards every connection to the
// socket, starts ARGV with its own standard streams (the protocol's pipes
// pass through untouched), forwards the signals it gets, and exits with
// the child's status; the child dies with it (PDEATHSIG).
//
// Doing it from outside instead (setns into the child's namespace and
// listen there) needs CAP_SYS_ADMIN in desk's own user namespace, that is
// root: desk does not need to be root.

// BridgeArg is the first argument that makes any binary linking this
// package a bridge (see init).
const BridgeArg = "__desk-gateway-bridge"

// GuestPort is the port the bridge listens on in the child's own network
// namespace (nothing else is there, so a fixed port cannot clash).
const GuestPort = 41100

// GuestSocketDir is where an endpoint's socket directory is bound in the
// sandbox.
const GuestSocketDir = "/run/desk-gateway"

// init turns the process into a bridge when it was started as one. It is
// here, not in desk's main, so every binary linking the runtime host
// (desk, and the tests that run real runtimes through it) can bridge.
func init() {
	if len(os.Args) > 1 && os.Args[1] == BridgeArg {
		os.Exit(bridgeMain(os.Args[2:]))
	}
}

// BridgeArgv is the sandbox's command line for argv behind the bridge.
func BridgeArgv(exe string, argv []string) []string {
	return append([]string{exe, BridgeArg, "--listen", fmt.Sprintf("127.0.0.1:%d", GuestPort), "--socket", GuestSocketDir + "/" + SocketName, "--"}, argv...)
}

func bridgeMain(args []string) int {
	var listen, socket string
	for len(args) > 0 && args[0] != "--" {
		if len(args) < 2 {
			return bridgeFail(errors.New("usage: " + BridgeArg + " --listen ADDR --socket PATH -- ARGV…"))
		}
		switch args[0] {
		case "--listen":
			listen = args[1]
		case "--socket":
			socket = args[1]
		default:
			return bridgeFail(fmt.Errorf("unknown flag %s", args[0]))
		}
		args = args[2:]
	}
	if len(args) < 2 || listen == "" || socket == "" {
		return bridgeFail(errors.New("usage: " + BridgeArg + " --listen ADDR --socket PATH -- ARGV…"))
	}
	argv := args[1:]
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return bridgeFail(fmt.Errorf("listen on %s: %w", listen, err))
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go pipe(c, socket)
		}
	}()
	// PDEATHSIG belongs to the thread that started the child: keep this
	// goroutine on it for the child's life.
	runtime.LockOSThread()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	setDeathSignal(cmd)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		return bridgeFail(err)
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return bridgeFail(err)
}

// pipe joins a connection of the child's to the gateway's socket.
func pipe(c net.Conn, socket string) {
	defer c.Close()
	u, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "desk gateway bridge: cannot reach desk's model gateway: %v\n", err)
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(u, c)
		if cw, ok := u.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		io.Copy(c, u)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

func bridgeFail(err error) int {
	fmt.Fprintf(os.Stderr, "desk gateway bridge: %s\n", strings.TrimSpace(err.Error()))
	return 126
}
