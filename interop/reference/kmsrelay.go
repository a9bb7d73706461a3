package main

// The KMS v2 relay: a unix socket the reference's encryption config points its `kms`
// provider at, passing every call on to the plugin on another socket.
//
// Why it exists: kube's own KMS v2 client (kmsv2.NewGRPCService, grpc-go 1.65) dials
// a socket path with grpc-go's passthrough resolver, which sends the path itself,
// percent-encoded (`%2Ftmp%2F...%2Fkms.sock`), as the HTTP/2 `:authority`. Go plugins
// accept that; plugins on Rust's h2 (tonic), such as apistore's test plugin, refuse the
// request as a malformed authority (RST_STREAM PROTOCOL_ERROR). The relay is a grpc-go
// server, so it takes kube's client as any Go plugin does, and reaches the plugin with
// the `localhost` authority that kube itself uses for unix sockets elsewhere. Requests
// and answers pass through unchanged: the envelope, the DEK seeds, key ids and
// annotations are kube's and the plugin's.

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	kmsapi "k8s.io/kms/apis/v2"
)

type kmsRelay struct {
	kmsapi.UnimplementedKeyManagementServiceServer
	plugin kmsapi.KeyManagementServiceClient
}

func (r *kmsRelay) Status(ctx context.Context, req *kmsapi.StatusRequest) (*kmsapi.StatusResponse, error) {
	return r.plugin.Status(ctx, req)
}

func (r *kmsRelay) Encrypt(ctx context.Context, req *kmsapi.EncryptRequest) (*kmsapi.EncryptResponse, error) {
	return r.plugin.Encrypt(ctx, req)
}

func (r *kmsRelay) Decrypt(ctx context.Context, req *kmsapi.DecryptRequest) (*kmsapi.DecryptResponse, error) {
	return r.plugin.Decrypt(ctx, req)
}

// startKMSRelay serves `listen=plugin` (two socket paths) until the process ends.
func startKMSRelay(spec string) error {
	listen, plugin, ok := strings.Cut(spec, "=")
	if !ok || listen == "" || plugin == "" {
		return fmt.Errorf("-kms-relay %q: want <listen socket>=<plugin socket>", spec)
	}
	conn, err := grpc.NewClient(
		"unix://"+plugin,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
	)
	if err != nil {
		return fmt.Errorf("-kms-relay: plugin %s: %w", plugin, err)
	}
	_ = os.Remove(listen)
	listener, err := net.Listen("unix", listen)
	if err != nil {
		return fmt.Errorf("-kms-relay: listen on %s: %w", listen, err)
	}
	server := grpc.NewServer()
	kmsapi.RegisterKeyManagementServiceServer(server, &kmsRelay{plugin: kmsapi.NewKeyManagementServiceClient(conn)})
	go func() { _ = server.Serve(listener) }()
	return nil
}
