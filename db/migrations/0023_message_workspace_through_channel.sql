ALTER TABLE "messages" DROP CONSTRAINT "messages_workspace_id_workspaces_id_fk";
