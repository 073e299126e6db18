// Starts the official DynamoDB Local bound to 127.0.0.1 only.
// DynamoDB Local's own launcher has no bind-address option (its Jetty server listens on every
// interface), so this builds the same request handlers and mounts them on a loopback connector.
// Usage: java -Djava.library.path=<dir with libsqlite4java> -cp "<jars>/*" DynamoDBLocalLoopback.java <port>
import com.amazonaws.services.dynamodbv2.local.server.DynamoDBProxyServer;
import com.amazonaws.services.dynamodbv2.local.server.LocalDynamoDBRequestHandler;
import com.amazonaws.services.dynamodbv2.local.server.LocalDynamoDBServerHandler;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public class DynamoDBLocalLoopback {
    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        LocalDynamoDBRequestHandler requests = new LocalDynamoDBRequestHandler(0, true, null, true, false);
        LocalDynamoDBServerHandler handler = new LocalDynamoDBServerHandler(requests, null);
        DynamoDBProxyServer proxy = new DynamoDBProxyServer(port, handler);  // never started: only its handlers are used
        Server server = new Server();
        ServerConnector connector = new ServerConnector(server);
        connector.setHost("127.0.0.1");
        connector.setPort(port);
        server.addConnector(connector);
        server.setHandler(proxy.setUpHandler(handler));
        server.start();
        System.out.println("DynamoDB Local listening on 127.0.0.1:" + port);
        System.out.flush();
        server.join();
    }
}
