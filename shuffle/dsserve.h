/* dsserve.h: the node service (remote reads, epoch shuffle over MPI RMA). */
#ifndef DSSERVE_H
#define DSSERVE_H

int ds_cmd_serve(int argc, char **argv);
int ds_cmd_run(int argc, char **argv);
int ds_cmd_stop(int argc, char **argv);
int ds_cmd_drain(int argc, char **argv);

#endif
