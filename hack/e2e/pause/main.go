// The pod sandbox ("pause") image of `make e2e`: holds the pod's namespaces and does nothing else. A static binary in a
// scratch image, built here so that no image is pulled from a registry. It exits on SIGINT/SIGTERM, as the upstream
// pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	<-signals
}
