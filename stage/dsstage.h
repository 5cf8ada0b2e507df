/* dsstage.h: the stage-in job step and the node-store commands. */
#ifndef DSSTAGE_H
#define DSSTAGE_H

int ds_cmd_stage(int argc, char **argv);
int ds_cmd_env(int argc, char **argv);
int ds_cmd_status(int argc, char **argv);
int ds_cmd_clean(int argc, char **argv);

#endif
