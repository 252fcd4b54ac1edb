/*
 * drive.h: what sl_dp_embedded_drive answers libsluice besides the work
 * its pass did (>= 0).  libsluice dlopens the embedded dataplane: this is
 * all the two share of the call.
 */
#ifndef SLUICE_DRIVE_H
#define SLUICE_DRIVE_H

#define SL_DRIVE_BUSY (-1)    /* another thread is in a pass: yield to it */
#define SL_DRIVE_YIELDED (-2) /* the pass found nothing and gave the core away (ranks share cores) */

#endif
