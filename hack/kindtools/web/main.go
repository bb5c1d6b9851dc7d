// Command web is the tiny HTTP server the kind cluster's WebApps run
// (hack/image.sh builds it into an image FROM scratch): it answers every
// request on :8080 (PORT) with its pod's name, so a test can tell that a
// Service really routed to a pod.
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
)

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "webapp %s %s\n", host, r.URL.Path)
	})
	log.Printf("listening on :%s", port)
	log.Fatal(http.ListenAndServe(":"+port, nil))
}
