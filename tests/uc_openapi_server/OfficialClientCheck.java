// Drives the UC OpenAPI test server with Unity Catalog's official Java client
// (io.unitycatalog:unitycatalog-client, generated from all.yaml and delta.yaml), so that requests
// the official models serialise are accepted and the server's answers deserialise into them.
//
//   java -cp '.cache/jars/unitycatalog/*' OfficialClientCheck.java v1|preview HOST PORT TOKEN \
//        CATALOG.SCHEMA.TABLE TABLE_ID TABLE_URI v:fileName:size:mtime:ict ...
//
// Ratifies the given (already staged) commits, replays the first (idempotent), proposes a
// conflicting file for the first version (must be a typed 409), then lists the commits.
// Prints "RATIFIED <v>", "REPLAY OK", "CONFLICT <code> <type>", "LISTED <v,...> LATEST <n>".

import io.unitycatalog.client.ApiClient;
import io.unitycatalog.client.ApiException;
import io.unitycatalog.client.api.DeltaCommitsApi;
import io.unitycatalog.client.delta.DeltaApiException;
import io.unitycatalog.client.delta.api.DeltaTablesApi;
import io.unitycatalog.client.delta.model.DeltaAddCommitUpdate;
import io.unitycatalog.client.delta.model.DeltaAssertTableUUID;
import io.unitycatalog.client.delta.model.DeltaLoadTableResponse;
import io.unitycatalog.client.delta.model.DeltaUpdateTableRequest;
import io.unitycatalog.client.model.DeltaCommit;
import io.unitycatalog.client.model.DeltaCommitInfo;
import io.unitycatalog.client.model.DeltaGetCommits;
import io.unitycatalog.client.model.DeltaGetCommitsResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.stream.Collectors;

public class OfficialClientCheck {
    record Staged(long version, String fileName, long size, long mtime, long ict) {}

    public static void main(String[] args) throws Exception {
        String api = args[0];
        ApiClient client = new ApiClient().setScheme("http").setHost(args[1]).setPort(Integer.parseInt(args[2]))
                .setBasePath("/api/2.1/unity-catalog");
        String token = args[3];
        client.setRequestInterceptor(b -> b.header("Authorization", "Bearer " + token));
        String[] name = args[4].split("\\.");
        String tableId = args[5];
        String tableUri = args[6];
        List<Staged> staged = new ArrayList<>();
        for (int i = 7; i < args.length; i++) {
            String[] p = args[i].split(":");
            staged.add(new Staged(Long.parseLong(p[0]), p[1], Long.parseLong(p[2]), Long.parseLong(p[3]), Long.parseLong(p[4])));
        }
        if (api.equals("v1")) {
            v1(new DeltaTablesApi(client), name, tableId, staged);
        } else {
            preview(new DeltaCommitsApi(client), tableId, tableUri, staged);
        }
    }

    static DeltaUpdateTableRequest addCommit(String tableId, Staged s, String fileName) {
        io.unitycatalog.client.delta.model.DeltaCommit commit = new io.unitycatalog.client.delta.model.DeltaCommit()
                .version(s.version()).timestamp(s.ict()).fileName(fileName).fileSize(s.size()).fileModificationTimestamp(s.mtime());
        return new DeltaUpdateTableRequest()
                .addRequirementsItem(new DeltaAssertTableUUID().uuid(UUID.fromString(tableId)).type("assert-table-uuid"))
                .addUpdatesItem(new DeltaAddCommitUpdate().commit(commit).action("add-commit"));
    }

    static void v1(DeltaTablesApi tables, String[] n, String tableId, List<Staged> staged) throws Exception {
        DeltaLoadTableResponse loaded = tables.loadTable(n[0], n[1], n[2]);
        if (!loaded.getMetadata().getTableUuid().toString().equals(tableId)) {
            throw new IllegalStateException("table-uuid " + loaded.getMetadata().getTableUuid() + " != " + tableId);
        }
        for (Staged s : staged) {
            DeltaLoadTableResponse after = tables.updateTable(n[0], n[1], n[2], addCommit(tableId, s, s.fileName()));
            System.out.println("RATIFIED " + s.version() + " LATEST " + after.getLatestTableVersion());
        }
        Staged first = staged.get(0);
        tables.updateTable(n[0], n[1], n[2], addCommit(tableId, first, first.fileName()));
        System.out.println("REPLAY OK");
        try {
            tables.updateTable(n[0], n[1], n[2], addCommit(tableId, first, String.format("%020d.%s.json", first.version(), UUID.randomUUID())));
            System.out.println("CONFLICT none");
        } catch (ApiException e) {
            DeltaApiException d = DeltaApiException.from(e).orElseThrow(() -> e);
            System.out.println("CONFLICT " + d.getErrorCode() + " " + d.getErrorType().getValue());
        }
        DeltaLoadTableResponse last = tables.loadTable(n[0], n[1], n[2]);
        String versions = last.getCommits().stream().map(c -> String.valueOf(c.getVersion())).collect(Collectors.joining(","));
        System.out.println("LISTED " + versions + " LATEST " + last.getLatestTableVersion());
    }

    static DeltaCommit previewCommit(String tableId, String tableUri, Staged s, String fileName) {
        return new DeltaCommit().tableId(tableId).tableUri(tableUri).commitInfo(new DeltaCommitInfo()
                .version(s.version()).timestamp(s.ict()).fileName(fileName).fileSize(s.size()).fileModificationTimestamp(s.mtime()));
    }

    static void preview(DeltaCommitsApi commits, String tableId, String tableUri, List<Staged> staged) throws Exception {
        for (Staged s : staged) {
            commits.commit(previewCommit(tableId, tableUri, s, s.fileName()));
            System.out.println("RATIFIED " + s.version());
        }
        Staged first = staged.get(0);
        commits.commit(previewCommit(tableId, tableUri, first, first.fileName()));
        System.out.println("REPLAY OK");
        try {
            commits.commit(previewCommit(tableId, tableUri, first, String.format("%020d.%s.json", first.version(), UUID.randomUUID())));
            System.out.println("CONFLICT none");
        } catch (ApiException e) {
            String body = e.getResponseBody() == null ? "" : e.getResponseBody();
            String code = body.replaceAll("(?s).*\"error_code\"\\s*:\\s*\"([A-Z_]+)\".*", "$1");
            System.out.println("CONFLICT " + e.getCode() + " " + code);
        }
        DeltaGetCommitsResponse listed = commits.getCommits(new DeltaGetCommits().tableId(tableId).tableUri(tableUri).startVersion(0L));
        String versions = listed.getCommits().stream().map(c -> String.valueOf(c.getVersion())).collect(Collectors.joining(","));
        System.out.println("LISTED " + versions + " LATEST " + listed.getLatestTableVersion());
    }
}
