// Command pause is the pod sandbox's infrastructure process, built into the
// pause image of the kind node (hack/kind.sh) because no image can be pulled.
// Like Kubernetes' build/pause/linux/pause.c it sleeps until SIGINT or
// SIGTERM and, as PID 1 of a pod with a shared PID namespace, reaps orphans.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
