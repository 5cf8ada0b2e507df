/* placeholder until the module lands */
#include "dscommon.h"
#include "dspack.h"
int ds_cmd_pack(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ds_error("this build has no pack yet");
	return 1;
}
int ds_cmd_verify(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ds_error("this build has no verify yet");
	return 1;
}
int ds_cmd_ls(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ds_error("this build has no ls yet");
	return 1;
}
int ds_cmd_cat(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ds_error("this build has no cat yet");
	return 1;
}
