/* dspack.h: the pack format (HDF5 partitions + manifest) and the commands
 * that write and read it: pack, verify, ls, cat.  See README "Pack format". */
#ifndef DSPACK_H
#define DSPACK_H

int ds_cmd_pack(int argc, char **argv);
int ds_cmd_verify(int argc, char **argv);
int ds_cmd_ls(int argc, char **argv);
int ds_cmd_cat(int argc, char **argv);

#endif
